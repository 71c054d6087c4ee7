// A Qwen3-MoE checkpoint's tensors: the resident spine (embeddings,
// attention, norms, routers, dense MLP layers, lm_head) loaded into RAM in
// their stored BF16, and the routed experts as records of bytes, one per
// (layer, expert), exactly as released: gate_proj ‖ up_proj ‖ down_proj,
// each the tensor's BF16 bytes in the checkpoint's row-major order. The
// model reads records only through an ExpertSource, so they can stay on SSD.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "format/safetensors_writer.h"
#include "model/common/expert_source.h"
#include "model/common/matrix.h"
#include "model/common/spine_source.h"
#include "model/qwen3/qwen3_attention.h"
#include "model/qwen3_moe/qwen3_moe_config.h"

namespace deltafin {

struct Qwen3MoeLayerWeights {
  Qwen3AttentionWeights attn;
  std::vector<float> post_attention_norm;  // [hidden]
  Matrix router;                           // mlp.gate.weight [E, hidden]: MoE layers
  Matrix gate, up, down;                   // mlp.{gate,up,down}_proj: dense layers
};

struct Qwen3MoeWeights {
  Matrix embed, lm_head;  // lm_head empty when tied
  std::vector<float> final_norm;
  std::vector<Qwen3MoeLayerWeights> layers;
  uint64_t bytes = 0;  // resident spine bytes
  const Matrix& output() const { return lm_head.rows ? lm_head : embed; }
};

// One expert's tensor names, in record order (gate, up, down).
std::vector<std::string> qwen3_moe_expert_tensor_names(int64_t layer, int64_t expert);

// Every tensor of a checkpoint of `config` with dtype and shape, in the order
// transformers' state dict lists them (experts inside their layer).
std::vector<TensorSpec> qwen3_moe_tensor_specs(const Qwen3MoeConfig& config);
// The spine's tensors only (everything but the routed experts).
std::vector<TensorSpec> qwen3_moe_spine_specs(const Qwen3MoeConfig& config);

// Refuses a checkpoint holding a tensor the architecture described by
// `config` does not have (another architecture, or a config of another model).
void check_no_unknown_qwen3_moe_tensors(const Qwen3MoeConfig& config, const Checkpoint& checkpoint);

// Loads the spine; refuses a checkpoint with a tensor the architecture does
// not have, or one of the wrong dtype or shape, naming the shard.
Qwen3MoeWeights load_qwen3_moe_weights(const Qwen3MoeConfig& config, const Checkpoint& checkpoint);
// From any spine source (a store's spine files), shapes checked against the config.
Qwen3MoeWeights load_qwen3_moe_weights(const Qwen3MoeConfig& config, SpineTensorSource& source);

// One expert record read from the checkpoint (dtype and shape checked).
std::vector<uint8_t> read_qwen3_moe_expert_record(const Qwen3MoeConfig& config, const Checkpoint& checkpoint,
                                                  int64_t layer, int64_t expert);
// The same bytes written to out (config.expert_record_bytes() of them).
void read_qwen3_moe_expert_record_into(const Qwen3MoeConfig& config, const Checkpoint& checkpoint, int64_t layer,
                                       int64_t expert, uint8_t* out);

// Every expert of every MoE layer in RAM: the resident reference.
std::unique_ptr<ResidentExpertSource> load_resident_qwen3_moe_experts(const Qwen3MoeConfig& config,
                                                                      const Checkpoint& checkpoint);

}  // namespace deltafin
