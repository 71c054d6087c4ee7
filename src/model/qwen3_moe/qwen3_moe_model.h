// The Qwen3-MoE forward pass (transformers' Qwen3MoeForCausalLM) over 1..T new
// positions of a session: fp32 activations, BF16 weights widened exactly,
// fp32 accumulation in the kernels' canonical order. Per layer: Qwen3's
// attention half (model/qwen3/qwen3_attention.h), then on
// h = rmsnorm(x; post_attention_layernorm) either a dense SwiGLU MLP or the
// sparse MoE block:
//   p = softmax(router · h) in fp32; the k experts of highest p (ties to the
//   lower id, NaN last: model/common/greedy.h); w_i = p_i, divided by their
//   sum (in the decided order) when norm_topk_prob;
//   x += Σ_i w_i · down_i(silu(gate_i(h)) · up_i(h)), each product rounded
//   and added in the decided order.
// Experts come only through the ExpertSource; a T-position pass equals T
// one-position passes bit for bit (every row's arithmetic is independent of
// T and of the order experts arrive in).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/common/expert_source.h"
#include "model/common/route.h"
#include "model/common/rows.h"
#include "model/qwen3/qwen3_attention.h"
#include "model/qwen3/qwen3_session.h"
#include "model/qwen3_moe/qwen3_moe_config.h"
#include "model/qwen3_moe/qwen3_moe_weights.h"
#include "util/thread_pool.h"

namespace deltafin {

// CausalModel (model/common/causal_model.h) with Qwen3Sessions: a mark is a
// length and rewinding truncates the K/V cache, since a position's cached
// keys and values depend only on the tokens before it. PassShape: cancel is
// asked before every layer; slice_rows is not used (a pass runs all its
// rows through a layer at once; engine/prefill.h bounds a pass by
// ModelSummary::pass_row_bytes).
class Qwen3MoeModel : public CausalModel {
public:
  // Keeps references (config, weights and source must outlive the model);
  // pool may be null.
  Qwen3MoeModel(const Qwen3MoeConfig& config, const Qwen3MoeWeights& weights, ExpertSource& experts, ThreadPool* pool);

  const ModelSummary& summary() const override { return summary_; }
  std::unique_ptr<ModelSession> new_session() const override;
  // Appends `tokens` at positions session.length() ... and returns logits
  // [T, V] when all_logits, else [1, V] for the last position. Bad token ids,
  // an empty span or a session of another shape are refused before the
  // session changes.
  Rows forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
               const PassShape& shape = {}) override;
  std::shared_ptr<SessionMark> mark(const ModelSession& session) const override;
  void rewind(ModelSession& session, const SessionMark& mark) const override;
  // A state is the K/V cache's first `length` positions: per layer in order,
  // the keys then the values ([length, kv_dim] fp32 each).
  std::unique_ptr<ModelSession> copy_at(const ModelSession& session, const SessionMark& at) const override;
  uint64_t state_values(int64_t length) const override;
  void for_each_state_part(const ModelSession& session, const SessionMark& at, const StatePartFn& part) const override;
  void read_state(ModelSession& fresh, int64_t length, const StateReadFn& read) const override;
  Rows forward_verify(ModelSession& session, std::span<const uint32_t> tokens) override;
  void keep_verified(ModelSession& session, size_t rows) override;

  // The routes of the last forward(), [layer][position] (empty for dense layers).
  const std::vector<std::vector<Route>>& last_routes() const override { return routes_; }
  const Qwen3MoeConfig& config() const { return c_; }

private:
  Route route(const float* router_logits) const;
  void moe(int64_t layer, const Rows& h, Rows& out);
  void dense_mlp(const Qwen3MoeLayerWeights& w, const Rows& h, Rows& out);
  void swiglu_pair(const WeightView& gate, const WeightView& up, const float* x, size_t n, Rows& g, Rows& u);

  const Qwen3MoeConfig& c_;
  const Qwen3MoeWeights& w_;
  ModelSummary summary_;
  int64_t verify_start_ = 0;  // the last forward_verify's pass, until keep_verified
  size_t verify_rows_ = 0;
  const ModelSession* verify_session_ = nullptr;
  ExpertSource& experts_;
  ThreadPool* pool_;
  Qwen3Rope rope_;
  std::vector<std::vector<Route>> routes_;
};

// The Qwen3Session behind a family-neutral session (an error for another family's).
Qwen3Session& qwen3_session(ModelSession& session);
const Qwen3Session& qwen3_session(const ModelSession& session);

ModelSummary qwen3_moe_summary(const Qwen3MoeConfig& config);

}  // namespace deltafin
