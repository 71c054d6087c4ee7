// The tensors of a DSpark checkpoint (k3-model.md §10.2): a Hugging Face
// directory with config.json and model.safetensors (or shards), every tensor
// BF16 with the shape its config gives. Matrices stay BF16 (the matmul kernel
// widens them exactly); norm weights and the confidence head are widened to
// fp32 at load, exactly. `embed_tokens` is checked but not kept: it is
// byte-identical to the target's, which the runtime uses instead.
#pragma once

#include <string>
#include <vector>

#include "model/kimi_k3/weights.h"
#include "model/k3_dspark/config.h"

namespace deltafin {

struct DSparkLayerWeights {
  std::vector<float> input_norm, post_attention_norm;  // [h]
  Matrix q_a;                 // [q_lora, h]
  std::vector<float> q_a_norm;  // [q_lora]
  Matrix q_b;                 // [H·(nope+rope), q_lora]
  Matrix kv_a;                // [kv_lora+rope, h]
  std::vector<float> kv_a_norm;  // [kv_lora]
  Matrix kv_b;                // [H·(nope+v), kv_lora]
  Matrix o;                   // [h, H·v]
  Matrix gate, up;            // [I, h]
  Matrix down;                // [h, I]
};

struct DSparkWeights {
  Matrix context_proj;                     // [h, n_targets·h]
  std::vector<float> context_norm, final_norm;  // [h]
  std::vector<DSparkLayerWeights> layers;
  Matrix markov_w1, markov_w2;             // [V, markov_rank] each
  std::vector<float> confidence_w;         // [h + markov_rank]
  float confidence_bias = 0;
  uint64_t bytes = 0;                      // resident bytes, for reporting
};

// Every tensor name of a DSpark checkpoint with its expected shape, in the
// order the generator writes them (embed_tokens included).
struct DSparkTensor {
  std::string name;
  std::vector<uint64_t> shape;
};
std::vector<DSparkTensor> dspark_tensor_list(const DSparkConfig& config);

// Opens `dir`'s safetensors, checks that exactly the tensors of
// dspark_tensor_list exist, each BF16 with its shape, and loads them. Errors
// name the tensor and the file.
DSparkWeights load_dspark_weights(const std::string& dir, const DSparkConfig& config);

}  // namespace deltafin
