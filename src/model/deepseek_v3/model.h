// The DeepSeek-V3-family forward pass (Hugging Face DeepseekV3ForCausalLM;
// DeepSeek's inference/model.py) over 1..T new positions of a session:
// fp32 activations, weights decoded exactly in the kernels (BF16 widened,
// FP8 e4m3 x block scale, INT4 x BF16 group scale), fp32 accumulation in the
// canonical order. Per layer:
//   x += o_proj(MLA(rmsnorm(x)))        the shared MLA block, interleaved
//                                       YaRN RoPE on the rope part
//   x += MLP(rmsnorm(x))                dense SwiGLU before first_k_dense_replace,
//                                       else routed experts (grouped sigmoid
//                                       top-k, model/common/routing.h) + shared experts
// Experts come only through the ExpertSource; a T-position pass equals T
// one-position passes bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/common/batch_pass.h"
#include "model/common/kv_session.h"
#include "model/common/mla_attention.h"
#include "model/common/rope.h"
#include "model/common/routed_experts.h"
#include "model/common/routing.h"
#include "model/deepseek_v3/config.h"
#include "model/deepseek_v3/weights.h"
#include "util/thread_pool.h"

namespace deltafin {

// A KvCacheModel whose cache is the latent one (one row of r_kv + d_rope
// floats per position and layer): marks are lengths, rewinding truncates.
class DeepseekV3Model : public KvCacheModel {
public:
  // Keeps references (config, weights, source and backend must outlive the model).
  DeepseekV3Model(const DeepseekV3Config& config, const DeepseekV3Weights& weights, ExpertSource& experts,
                  Backend& backend);
  DeepseekV3Model(const DeepseekV3Config& config, const DeepseekV3Weights& weights, ExpertSource& experts,
                  ThreadPool* pool);
  ~DeepseekV3Model() override;

  const ModelSummary& summary() const override { return summary_; }
  Rows forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
               const PassShape& shape = {}) override;
  // The parts' rows stacked through every layer; each part's MLA on its own
  // rows, its positions and its session's latent cache.
  std::vector<Rows> forward_batch(std::span<const BatchPart> parts, const PassShape& shape = {}) override;
  const std::vector<std::vector<Route>>& last_routes() const override { return routes_; }
  const DeepseekV3Config& config() const { return c_; }

private:
  std::unique_ptr<KvSession> make_session(int64_t capacity) const override;
  // The pass of forward() (one part) and forward_batch(): each part's logits
  // into `out`; false when cancelled (nothing committed).
  bool run_parts(std::span<const BatchPart> parts, const PassShape& shape, std::span<Rows> out);
  // Refuses bad parts before any session changes; fills sessions_.
  void check_parts(std::span<const BatchPart> parts);
  void route(int64_t layer, const Act& h);
  bool mlp(int64_t layer, const Act& h, Act& out, const std::function<bool()>& stop);

  const DeepseekV3Config& c_;
  const DeepseekV3Weights& w_;
  ModelSummary summary_;
  std::unique_ptr<Backend> own_backend_;
  Backend& be_;
  RoutedExperts experts_;
  ExpertSource& source_;
  MlaDims dims_;
  GroupedRouting rule_;
  RopeFreqs rope_;
  // Per part of the pass (reused; a vector only grows): its session, the
  // length it had before the pass, its RoPE rows.
  BatchLayout batch_;
  std::vector<KvSession*> sessions_;
  std::vector<int64_t> starts_;
  std::vector<RopeRows> rope_rows_;
  std::vector<float> router_host_;
  RouteScratch route_scratch_;
  std::vector<std::vector<Route>> routes_;
};

ModelSummary deepseek_v3_summary(const DeepseekV3Config& config);
// The latent cache's bytes per position (every layer's r_kv + d_rope floats).
uint64_t deepseek_v3_bytes_per_position(const DeepseekV3Config& config);

}  // namespace deltafin
