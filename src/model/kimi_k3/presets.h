// Dimensions of the small K3-architecture checkpoints the project generates
// for tests and benchmarks (k3-model.md §14). Every structural rule of K3 is
// kept; only sizes shrink.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/common/make_checkpoint.h"

namespace deltafin {

struct K3Dims {
  int64_t hidden = 0, layers = 0, block = 4, vocab = 0, intermediate = 0;
  int64_t experts = 0, top_k = 0, latent = 0, moe_intermediate = 0, shared = 2;
  int64_t kda_heads = 0, kda_head_dim = 0, conv_kernel = 4;
  int64_t mla_heads = 0, q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v_dim = 0;
  std::vector<int64_t> full_attn_layers;  // 1-based; empty = "every 4th plus the last"
};

// "tiny", "small", "bench" or "k3" (the real dimensions; only its config is
// practical to generate, but the code path is the same).
K3Dims preset_dims(const std::string& name);

// Overrides from the command line (any unset field keeps the preset's value).
K3Dims apply_overrides(K3Dims d, const DimOverrides& o);

// Every 4th layer (1-based) plus the last one, as in K3.
std::vector<int64_t> default_full_attn_layers(int64_t layers);

}  // namespace deltafin
