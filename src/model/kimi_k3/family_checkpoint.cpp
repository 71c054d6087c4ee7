#include "model/kimi_k3/family_checkpoint.h"

#include "model/kimi_k3/tensors.h"
#include "util/error.h"

namespace deltafin {

namespace {

const std::string kLayerPrefix = "language_model.model.layers.";

// Layer index of a per-layer tensor name, -1 for the globals.
int64_t layer_of(const std::string& name) {
  if (name.rfind(kLayerPrefix, 0) != 0) return -1;
  return std::stoll(name.substr(kLayerPrefix.size()));
}

// load_k3_weights reads rank-2 BF16 tensors as matrices, except the AttnRes
// pseudo-queries ([1, d], read as vectors); everything else as fp32 vectors.
bool loaded_as_matrix(const TensorSpec& s) {
  return s.shape.size() == 2 && s.dtype == DType::BF16 && s.name.find("res_proj") == std::string::npos;
}

}  // namespace

bool int8_row_target(const std::string& name) {
  static const char* const kept[] = {"conv1d",    "norm",      "A_log",  "dt_bias",     "res_proj",
                                     "e_score_correction_bias", ".experts.", "vision", "mm_projector"};
  for (const char* k : kept)
    if (name.find(k) != std::string::npos) return false;
  return name != "language_model.model.embed_tokens.weight";  // a lookup reads one row: kept BF16
}

K3FamilyCheckpoint::K3FamilyCheckpoint(const std::string& dir) : owned_(load_k3_checkpoint(dir)), k_(&*owned_) {}
K3FamilyCheckpoint::K3FamilyCheckpoint(const std::string& dir, const ShardOpener& opener)
    : owned_(load_k3_checkpoint(dir, opener)), k_(&*owned_) {}
K3FamilyCheckpoint::K3FamilyCheckpoint(const K3Checkpoint& k) : k_(&k) {}

std::vector<std::string> K3FamilyCheckpoint::expert_tensor_names(int64_t layer, int64_t expert) const {
  std::vector<std::string> out;
  for (const TensorSpec& t : k3_expert_tensors(k_->config, layer, expert)) out.push_back(t.name);
  return out;
}

std::vector<int64_t> K3FamilyCheckpoint::moe_layers() const {
  std::vector<int64_t> out;
  for (int64_t l = 0; l < k_->config.num_hidden_layers; ++l)
    if (k_->config.is_moe_layer(l)) out.push_back(l);
  return out;
}

std::vector<RecordPart> k3_record_layout(const K3Config& c) {
  int64_t l = 0;
  while (l < c.num_hidden_layers && !c.is_moe_layer(l)) ++l;
  return record_parts(k3_expert_tensors(c, l, 0), cat(kLayerPrefix, l, ".block_sparse_moe.experts.0."));
}

std::vector<RecordPart> K3FamilyCheckpoint::record_layout() const { return k3_record_layout(k_->config); }

std::vector<uint8_t> K3FamilyCheckpoint::read_expert_record(int64_t layer, int64_t expert) const {
  return k_->read_expert_record(layer, expert);
}

std::vector<SpineTensorSpec> K3FamilyCheckpoint::spine_tensors() const {
  std::vector<SpineTensorSpec> out;
  for (const TensorSpec& s : k3_language_tensors(k_->config, k_->kda_gate_rank)) {
    if (s.name.find(".experts.") != std::string::npos) continue;  // routed experts live on the drives
    const TensorInfo& info = *k_->tensor(s.name).info;
    const bool matrix = loaded_as_matrix(s);
    out.push_back({TensorSpec{s.name, info.dtype, info.shape}, layer_of(s.name), matrix, matrix && int8_row_target(s.name)});
  }
  return out;
}

}  // namespace deltafin
