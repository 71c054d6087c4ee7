// The weights of a Qwen3 dense checkpoint, loaded into RAM: matrices stay BF16
// as stored (the matmul kernel widens them exactly), norm weights are widened
// to fp32 at load. Every tensor's dtype and shape is checked against the
// config, and a tensor the architecture does not have is refused, so a
// checkpoint of another architecture never loads as this one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "format/safetensors_writer.h"
#include "kernels/weights.h"
#include "model/common/matrix.h"
#include "model/common/spine_source.h"
#include "model/qwen3/qwen3_attention.h"
#include "model/qwen3/qwen3_config.h"

namespace deltafin {

struct Qwen3LayerWeights {
  Qwen3AttentionWeights attn;
  std::vector<float> post_attention_norm;  // [hidden]
  Matrix gate, up, down;                   // [I, hidden] x2, [hidden, I]
};

struct Qwen3Weights {
  Matrix embed;    // [vocab, hidden]
  Matrix lm_head;  // [vocab, hidden]; empty when the embeddings are tied
  std::vector<float> final_norm;
  std::vector<Qwen3LayerWeights> layers;
  uint64_t bytes = 0;  // resident bytes, for reporting

  // The output projection: lm_head, or the embedding matrix when tied.
  const Matrix& output() const { return lm_head.rows ? lm_head : embed; }
};

// Every tensor a checkpoint of `config` holds, with dtype and shape, in the
// order the generator writes them (lm_head.weight only when not tied).
std::vector<TensorSpec> qwen3_tensor_specs(const Qwen3Config& config);

// Opens a Hugging Face checkpoint directory: model.safetensors, or shards
// model-00001-of-00002.safetensors ... with or without
// model.safetensors.index.json (format/checkpoint.h).
Checkpoint open_qwen3_checkpoint(const std::string& dir);

Qwen3Weights load_qwen3_weights(const Qwen3Config& config, const Checkpoint& checkpoint);

// Pieces the Qwen3-MoE loader shares: a BF16 matrix, a norm vector widened
// to fp32, a layer's attention weights (each checked against the expected
// shape, errors naming the shard), and the attention half's tensor specs.
Matrix load_qwen3_matrix(const Checkpoint& checkpoint, const std::string& name, uint64_t rows, uint64_t cols);
std::vector<float> load_qwen3_vector(const Checkpoint& checkpoint, const std::string& name, uint64_t n);
Qwen3AttentionWeights load_qwen3_attention(const Qwen3Config& config, const Checkpoint& checkpoint, int64_t layer);
void append_qwen3_attention_specs(const Qwen3Config& config, int64_t layer, std::vector<TensorSpec>& out);
uint64_t qwen3_attention_bytes(const Qwen3AttentionWeights& w);

// The same from any spine source (a store's spine files): a matrix must be
// BF16 of the given shape, a vector of n elements; errors name the tensor.
Matrix spine_bf16_matrix(SpineTensorSource& source, const std::string& name, uint64_t rows, uint64_t cols);
std::vector<float> spine_vector(SpineTensorSource& source, const std::string& name, uint64_t n);
Qwen3AttentionWeights load_qwen3_attention(const Qwen3Config& config, SpineTensorSource& source, int64_t layer);
Qwen3Weights load_qwen3_weights(const Qwen3Config& config, const std::string& dir);

}  // namespace deltafin
