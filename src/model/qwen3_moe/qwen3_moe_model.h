// The Qwen3-MoE forward pass (transformers' Qwen3MoeForCausalLM) over 1..T new
// positions of a session: fp32 activations, BF16 weights widened exactly,
// fp32 accumulation in the kernels' canonical order. Per layer: Qwen3's
// attention half (model/qwen3/qwen3_attention.h), then on
// h = rmsnorm(x; post_attention_layernorm) either a dense SwiGLU MLP or the
// sparse MoE block: softmax routing (model/common/routing.h) and the shared
// routed-experts block (model/common/routed_experts.h) with SwiGLU experts
// of BF16 gate, up and down projections.
// Experts come only through the ExpertSource; a T-position pass equals T
// one-position passes bit for bit (every row's arithmetic is independent of
// T and of the order experts arrive in).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/common/batch_pass.h"
#include "model/common/kv_session.h"
#include "model/common/routed_experts.h"
#include "model/common/routing.h"
#include "model/qwen3/qwen3_attention.h"
#include "model/qwen3/qwen3_session.h"
#include "model/qwen3_moe/qwen3_moe_config.h"
#include "model/qwen3_moe/qwen3_moe_weights.h"
#include "util/thread_pool.h"

namespace deltafin {

// A KvCacheModel (model/common/kv_session.h: marks are lengths, rewinding
// truncates). PassShape: cancel is asked before every layer and inside
// attention; slice_rows is not used (a pass runs all its rows through a
// layer at once; engine/prefill.h bounds a pass by ModelSummary::pass_row_bytes).
class Qwen3MoeModel : public KvCacheModel {
public:
  // Keeps references (config, weights, source and backend must outlive the model).
  Qwen3MoeModel(const Qwen3MoeConfig& config, const Qwen3MoeWeights& weights, ExpertSource& experts, Backend& backend);
  // The same on a CPU backend of its own over `pool` (may be null).
  Qwen3MoeModel(const Qwen3MoeConfig& config, const Qwen3MoeWeights& weights, ExpertSource& experts, ThreadPool* pool);
  ~Qwen3MoeModel() override;

  const ModelSummary& summary() const override { return summary_; }
  // Appends `tokens` at positions session.length() ... and returns logits
  // [T, V] when all_logits, else [1, V] for the last position. Bad token ids,
  // an empty span or a session of another shape are refused before the
  // session changes.
  Rows forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
               const PassShape& shape = {}) override;
  // The parts' rows stacked through every layer; each part's attention on
  // its own rows, its positions and its session's cache.
  std::vector<Rows> forward_batch(std::span<const BatchPart> parts, const PassShape& shape = {}) override;
  // The routes of the last forward(), [layer][position] (empty for dense
  // layers; of a forward_batch: the stacked rows').
  const std::vector<std::vector<Route>>& last_routes() const override { return routes_; }
  const Qwen3MoeConfig& config() const { return c_; }

private:
  std::unique_ptr<KvSession> make_session(int64_t capacity) const override;
  // The pass of forward() (one part) and forward_batch(): each part's logits
  // into `out`; false when cancelled (nothing committed).
  bool run_parts(std::span<const BatchPart> parts, const PassShape& shape, std::span<Rows> out);
  // Refuses bad parts before any session changes; fills sessions_.
  void check_parts(std::span<const BatchPart> parts);
  void route(int64_t layer, const Act& h);
  bool moe(int64_t layer, const Act& h, Act& out, const std::function<bool()>& stop);

  const Qwen3MoeConfig& c_;
  const Qwen3MoeWeights& w_;
  ModelSummary summary_;
  std::unique_ptr<Backend> own_backend_;
  Backend& be_;
  RoutedExperts experts_;
  ExpertSource& source_;
  Qwen3Rope rope_;
  // Per part of the pass (reused; a vector only grows): its session, the
  // length it had before the pass, its RoPE rows.
  BatchLayout batch_;
  std::vector<KvSession*> sessions_;
  std::vector<int64_t> starts_;
  std::vector<Qwen3RopeRows> rope_rows_;
  std::vector<float> router_host_;  // a layer's router logits, read for the routing decision
  RouteScratch route_scratch_;
  std::vector<std::vector<Route>> routes_;
};

// The Qwen3Session behind a family-neutral session (an error for another family's).
Qwen3Session& qwen3_session(ModelSession& session);
const Qwen3Session& qwen3_session(const ModelSession& session);

ModelSummary qwen3_moe_summary(const Qwen3MoeConfig& config);

}  // namespace deltafin
