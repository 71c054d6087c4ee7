// A DeepSeek-V3-family checkpoint's tensors (names and dtypes as released:
// docs/deepseek-v3.md). The spine — embeddings, MLA, norms, routers and
// their correction biases, dense and shared-expert MLPs, lm_head — is loaded
// into RAM in its released type (BF16, or FP8 e4m3 with its 128 x 128 block
// scales); the routed experts are records of their released bytes
// (expert_record.h), read only through an ExpertSource. The MTP layer
// (model.layers.<num_hidden_layers>.*) is recognised but not loaded here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "format/safetensors_writer.h"
#include "model/common/expert_source.h"
#include "model/common/matrix.h"
#include "model/common/mla_attention.h"
#include "model/common/spine_source.h"
#include "model/deepseek_v3/config.h"

namespace deltafin {

struct DsMlp {
  Matrix gate, up, down;
  uint64_t bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
};

struct DsLayerWeights {
  std::vector<float> input_norm, post_attention_norm;
  MlaWeights mla;
  DsMlp dense;                      // layers before first_k_dense_replace
  Matrix router;                    // mlp.gate.weight [E, hidden]: MoE layers
  std::vector<float> router_bias;   // mlp.gate.e_score_correction_bias [E]
  DsMlp shared;                     // mlp.shared_experts (n_shared_experts > 0)
};

struct DeepseekV3Weights {
  Matrix embed, lm_head;
  std::vector<float> final_norm;
  std::vector<DsLayerWeights> layers;
  uint64_t bytes = 0;          // resident spine bytes as loaded
  uint64_t derived_bytes = 0;  // MLA's derived key transposes (mla_attention.h)
};

MlaDims deepseek_v3_mla_dims(const DeepseekV3Config& config);

// One routed expert's tensors in record order (expert_record.h): the three
// values, then the three scale tensors (FP8: weight_scale_inv; INT4:
// weight_scale), with their dtypes and shapes.
std::vector<TensorSpec> deepseek_v3_expert_specs(const DeepseekV3Config& config, int64_t layer, int64_t expert);
// The spine's tensors as the checkpoint holds them (a linear is BF16, or
// F8_E4M3 with its F32 scale tensor: whichever the file has), MTP excluded.
std::vector<TensorSpec> deepseek_v3_spine_specs(const DeepseekV3Config& config, const Checkpoint& checkpoint);
// Refuses a checkpoint with a tensor the architecture does not have, one
// missing, or one of another dtype or shape than the config gives.
void check_deepseek_v3_tensors(const DeepseekV3Config& config, const Checkpoint& checkpoint);

DeepseekV3Weights load_deepseek_v3_weights(const DeepseekV3Config& config, const Checkpoint& checkpoint);
DeepseekV3Weights load_deepseek_v3_weights(const DeepseekV3Config& config, SpineTensorSource& source);

void read_deepseek_v3_expert_record_into(const DeepseekV3Config& config, const Checkpoint& checkpoint, int64_t layer,
                                         int64_t expert, uint8_t* out);
std::unique_ptr<ResidentExpertSource> load_resident_deepseek_v3_experts(const DeepseekV3Config& config,
                                                                        const Checkpoint& checkpoint);

}  // namespace deltafin
