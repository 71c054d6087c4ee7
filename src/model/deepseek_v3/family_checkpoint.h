// A DeepSeek-V3-family checkpoint as the store sees it
// (model/common/family_checkpoint.h): everything but the routed experts and
// the MTP layer is the spine (each linear in its released type: BF16, or
// F8_E4M3 beside its F32 weight_scale_inv), the MoE layers hold the routed
// experts, and a record is one expert's tensors as released
// (expert_record.h).
#pragma once

#include <string>

#include "model/common/family_checkpoint.h"
#include "model/deepseek_v3/config.h"
#include "model/deepseek_v3/weights.h"

namespace deltafin {

std::vector<RecordPart> deepseek_v3_record_layout(const DeepseekV3Config& config);

class DeepseekV3FamilyCheckpoint : public FamilyCheckpoint {
public:
  explicit DeepseekV3FamilyCheckpoint(const std::string& dir);
  DeepseekV3FamilyCheckpoint(const std::string& dir, const ShardOpener& opener);

  std::string family() const override { return "deepseek_v3"; }
  const Checkpoint& tensors() const override { return checkpoint_; }
  int64_t layers() const override { return config_.num_hidden_layers; }
  int64_t experts() const override { return config_.n_routed_experts; }
  std::vector<int64_t> moe_layers() const override { return config_.moe_layers(); }
  std::vector<RecordPart> record_layout() const override { return deepseek_v3_record_layout(config_); }
  std::vector<std::string> expert_tensor_names(int64_t layer, int64_t expert) const override;
  std::vector<uint8_t> read_expert_record(int64_t layer, int64_t expert) const override;
  std::vector<SpineTensorSpec> spine_tensors() const override;
  // DeepSeek releases a tokenizer.json, Kimi K2 a tiktoken.model (those present are copied).
  std::vector<std::string> tokenizer_files() const override {
    return {"tokenizer.json", "tiktoken.model", "tokenizer_config.json", "generation_config.json"};
  }
  const DeepseekV3Config& config() const { return config_; }

private:
  DeepseekV3Config config_;
  Checkpoint checkpoint_;
};

}  // namespace deltafin
