// A Qwen3-MoE checkpoint as the store sees it (model/common/family_checkpoint.h):
// everything but model.layers.{l}.mlp.experts.* is the spine, the sparse
// layers hold the routed experts, and a record is one expert's gate_proj,
// up_proj and down_proj in BF16, as released.
#pragma once

#include <string>

#include "model/common/family_checkpoint.h"
#include "model/qwen3_moe/qwen3_moe_config.h"
#include "model/qwen3_moe/qwen3_moe_weights.h"

namespace deltafin {

// Qwen3-MoE's expert record: gate, up and down projections, BF16.
std::vector<RecordPart> qwen3_moe_record_layout(const Qwen3MoeConfig& config);

class Qwen3MoeFamilyCheckpoint : public FamilyCheckpoint {
public:
  explicit Qwen3MoeFamilyCheckpoint(const std::string& dir);  // opens it and checks every tensor's dtype and shape
  Qwen3MoeFamilyCheckpoint(const std::string& dir, const ShardOpener& opener);  // the same, its shards through `opener`

  std::string family() const override { return "qwen3_moe"; }
  const Checkpoint& tensors() const override { return checkpoint_; }
  int64_t layers() const override { return config_.base.num_hidden_layers; }
  int64_t experts() const override { return config_.num_experts; }
  std::vector<int64_t> moe_layers() const override { return config_.moe_layers(); }
  std::vector<RecordPart> record_layout() const override;
  std::vector<std::string> expert_tensor_names(int64_t layer, int64_t expert) const override {
    return qwen3_moe_expert_tensor_names(layer, expert);
  }
  std::vector<uint8_t> read_expert_record(int64_t layer, int64_t expert) const override;
  std::vector<SpineTensorSpec> spine_tensors() const override;
  std::vector<std::string> tokenizer_files() const override { return {"tokenizer.json", "tokenizer_config.json"}; }
  const Qwen3MoeConfig& config() const { return config_; }

private:
  void check_tensors(const std::string& dir) const;
  Qwen3MoeConfig config_;
  Checkpoint checkpoint_;
};

}  // namespace deltafin
