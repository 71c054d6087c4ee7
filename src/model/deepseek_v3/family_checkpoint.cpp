#include "model/deepseek_v3/family_checkpoint.h"

#include "util/error.h"

namespace deltafin {

DeepseekV3FamilyCheckpoint::DeepseekV3FamilyCheckpoint(const std::string& dir)
    : config_(read_deepseek_v3_config(dir + "/config.json")), checkpoint_(Checkpoint::open(dir)) {
  check_deepseek_v3_tensors(config_, checkpoint_);
}

DeepseekV3FamilyCheckpoint::DeepseekV3FamilyCheckpoint(const std::string& dir, const ShardOpener& opener)
    : config_(read_deepseek_v3_config(dir + "/config.json")), checkpoint_(Checkpoint::open_remote(dir, opener)) {
  check_deepseek_v3_tensors(config_, checkpoint_);
}

std::vector<RecordPart> deepseek_v3_record_layout(const DeepseekV3Config& c) {
  const int64_t l = c.moe_layers().front();
  return record_parts(deepseek_v3_expert_specs(c, l, 0), cat("model.layers.", l, ".mlp.experts.0."));
}

std::vector<std::string> DeepseekV3FamilyCheckpoint::expert_tensor_names(int64_t layer, int64_t expert) const {
  std::vector<std::string> out;
  for (const TensorSpec& t : deepseek_v3_expert_specs(config_, layer, expert)) out.push_back(t.name);
  return out;
}

std::vector<uint8_t> DeepseekV3FamilyCheckpoint::read_expert_record(int64_t layer, int64_t expert) const {
  std::vector<uint8_t> record(config_.expert_record_bytes());
  read_deepseek_v3_expert_record_into(config_, checkpoint_, layer, expert, record.data());
  return record;
}

std::vector<SpineTensorSpec> DeepseekV3FamilyCheckpoint::spine_tensors() const {
  std::vector<SpineTensorSpec> out;
  const std::string layers = "model.layers.";
  for (const TensorSpec& t : deepseek_v3_spine_specs(config_, checkpoint_)) {
    const int64_t layer = t.name.rfind(layers, 0) == 0 ? std::stoll(t.name.substr(layers.size())) : -1;
    // Matrices load in their stored type (their FP8 scale grids with them,
    // as raw bytes); norms, biases are widened to fp32.
    const bool matrix = t.shape.size() == 2;
    out.push_back({t, layer, matrix, false});
  }
  return out;
}

}  // namespace deltafin
