// The resident spine of a K3-architecture model: every non-expert tensor,
// loaded into RAM once. Matrices keep their stored type (BF16 here; int8-row
// comes with the store); small vectors (norm weights, biases, convolution
// taps) are widened to fp32 at load, exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "format/k3_checkpoint.h"
#include "kernels/weights.h"

namespace deltafin {

// An owned matrix; view() points into its own storage.
struct Matrix {
  WeightType type = WeightType::BF16;
  size_t rows = 0, cols = 0;
  std::vector<uint8_t> storage;
  WeightView view() const { return WeightView{type, rows, cols, storage.data(), nullptr}; }
};

struct KdaWeights {
  Matrix q, k, v, g, f_a, f_b, b, o;
  std::vector<float> a_log, dt_bias, q_conv, k_conv, v_conv, o_norm;
};

struct MlaWeights {
  Matrix q_a, q_b, kv_a, kv_b, g, o;
  std::vector<float> q_a_norm, kv_a_norm;
};

struct DenseMlpWeights {
  Matrix gate, up, down;
};

struct MoeWeights {
  Matrix router, latent_down, latent_up, shared_gate, shared_up, shared_down;
  std::vector<float> correction_bias, latent_norm;
};

struct LayerWeights {
  LayerKind kind = LayerKind::KDA;
  std::vector<float> input_norm, post_attention_norm;
  // AttnRes pseudo-queries premultiplied by their norm weights (k3-model.md §7.2 Decision).
  std::vector<float> s_attn, s_mlp;
  KdaWeights kda;  // when kind == KDA
  MlaWeights mla;  // when kind == MLA
  DenseMlpWeights dense;  // layer 0
  MoeWeights moe;         // layers 1..L-1
};

struct K3Weights {
  Matrix embed, lm_head;
  std::vector<float> final_norm, s_out;
  std::vector<LayerWeights> layers;
  uint64_t bytes = 0;  // resident bytes, for reporting
};

K3Weights load_k3_weights(const K3Checkpoint& checkpoint);

}  // namespace deltafin
