// The Qwen3 dense forward pass (Hugging Face Qwen3ForCausalLM) for the draft
// model of speculative decoding: fp32 activations, BF16 weights, fp32
// accumulation. Per layer: x += o_proj(attn(rope(q_norm(q)), rope(k_norm(k)), v))
// on rmsnorm(x), then x += down(silu(gate(h)) * up(h)) on rmsnorm(x); final
// rmsnorm and lm_head. Each position's arithmetic is the same whether it runs
// alone or among T positions (matmul is T-independent, every reduction has a
// fixed order), so a T-position pass equals T one-position passes bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/qwen3/qwen3_attention.h"
#include "model/qwen3/qwen3_config.h"
#include "model/qwen3/qwen3_session.h"
#include "model/qwen3/qwen3_weights.h"
#include "util/thread_pool.h"

namespace deltafin {

class Qwen3Model {
public:
  // Keeps references to config, weights and backend (they must outlive the model).
  Qwen3Model(const Qwen3Config& config, const Qwen3Weights& weights, Backend& backend);
  // The same on a CPU backend of its own over `pool` (may be null: the calling thread).
  Qwen3Model(const Qwen3Config& config, const Qwen3Weights& weights, ThreadPool* pool);
  ~Qwen3Model();

  // Appends `tokens` (T >= 1) at positions session.length() .. + T - 1 and
  // returns logits: [T, vocab] row-major when all_logits, else [1, vocab] for
  // the last position. Token ids >= vocab_size, an empty span, a session of
  // another shape or one that would pass its capacity are refused before the
  // session changes.
  std::vector<float> forward(Qwen3Session& session, std::span<const uint32_t> tokens, bool all_logits);

  const Qwen3Config& config() const { return config_; }
  const Qwen3Weights& weights() const { return weights_; }

private:
  const Qwen3Config& config_;
  const Qwen3Weights& weights_;
  std::unique_ptr<Backend> own_backend_;
  Backend& be_;
  Qwen3Rope rope_;
  Qwen3RopeRows rope_rows_;
};

}  // namespace deltafin
