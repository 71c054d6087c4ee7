// A K3 checkpoint as the store sees it (model/common/family_checkpoint.h):
// the language model's non-expert tensors are the spine, layers 1 .. L-1
// hold the routed experts, and a record is k3-model.md §5.1's six MXFP4
// tensors (w1, w2, w3 packed and scale).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/kimi_k3/checkpoint.h"
#include "model/common/family_checkpoint.h"

namespace deltafin {

// True for the tensors §5.2 quantises in int8-row mode, by name (the caller
// also requires a rank-2 BF16 tensor).
bool int8_row_target(const std::string& tensor_name);

// K3's expert record (the six MXFP4 tensors of k3-model.md §5.1).
std::vector<RecordPart> k3_record_layout(const K3Config& config);

class K3FamilyCheckpoint : public FamilyCheckpoint {
public:
  explicit K3FamilyCheckpoint(const std::string& dir);          // opens and validates it
  K3FamilyCheckpoint(const std::string& dir, const ShardOpener& opener);  // the same, its shards through `opener`
  explicit K3FamilyCheckpoint(const K3Checkpoint& checkpoint);  // borrowed: it must outlive this
  // k_ may point into owned_: neither copied nor moved.
  K3FamilyCheckpoint(const K3FamilyCheckpoint&) = delete;
  K3FamilyCheckpoint& operator=(const K3FamilyCheckpoint&) = delete;

  std::string family() const override { return "kimi_k3"; }
  const Checkpoint& tensors() const override { return k_->tensors; }
  int64_t layers() const override { return k_->config.num_hidden_layers; }
  int64_t experts() const override { return k_->config.num_experts; }
  std::vector<int64_t> moe_layers() const override;
  std::vector<RecordPart> record_layout() const override;
  std::vector<std::string> expert_tensor_names(int64_t layer, int64_t expert) const override;
  std::vector<uint8_t> read_expert_record(int64_t layer, int64_t expert) const override;
  std::vector<SpineTensorSpec> spine_tensors() const override;
  std::vector<std::string> tokenizer_files() const override { return {"tiktoken.model", "tokenizer_config.json"}; }
  bool int8_row_spine() const override { return true; }
  const K3Checkpoint& k3() const { return *k_; }

private:
  std::optional<K3Checkpoint> owned_;
  const K3Checkpoint* k_;
};

}  // namespace deltafin
