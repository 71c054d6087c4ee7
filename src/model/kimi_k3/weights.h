// The resident spine of a K3-architecture model: every non-expert tensor,
// loaded into RAM once. Matrices keep their stored type (BF16 here; int8-row
// comes with the store); small vectors (norm weights, biases, convolution
// taps) are widened to fp32 at load, exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include "model/kimi_k3/checkpoint.h"
#include "kernels/weights.h"
#include "model/common/expert_source.h"
#include "model/common/matrix.h"
#include "model/common/mla_attention.h"
#include "model/common/spine_source.h"

namespace deltafin {

struct KdaWeights {
  Matrix q, k, v, g, f_a, f_b, b, o;
  std::vector<float> a_log, dt_bias, q_conv, k_conv, v_conv, o_norm;
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
  uint64_t bytes = 0;          // resident bytes of the loaded tensors (= a store's spine_bytes)
  uint64_t derived_bytes = 0;  // resident bytes computed at load from them (MlaWeights::kv_b_key_t)
};

// What load_k3_weights will add as derived_bytes, before loading (memory plans).
uint64_t k3_derived_weight_bytes(const K3Config& config, bool int8_row_spine);
// K3's MLA shape for the shared block (model/common/mla_attention.h): NoPE,
// the score scale (float)((d_nope + d_rope)^-0.5).
MlaDims k3_mla_dims(const K3Config& config);

// Every spine tensor of `config`, named as in the checkpoint (model/kimi_k3/tensors.h).
K3Weights load_k3_weights(const K3Config& config, SpineTensorSource& source);
K3Weights load_k3_weights(const K3Checkpoint& checkpoint);

// Every routed expert of the checkpoint (layers 1..L-1) read into RAM.
std::unique_ptr<ResidentExpertSource> load_resident_k3_experts(const K3Checkpoint& checkpoint);

}  // namespace deltafin
