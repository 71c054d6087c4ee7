#include "model/qwen3_moe/family_checkpoint.h"

#include "model/qwen3_moe/qwen3_moe_weights.h"
#include "util/error.h"

namespace deltafin {

Qwen3MoeFamilyCheckpoint::Qwen3MoeFamilyCheckpoint(const std::string& dir)
    : config_(read_qwen3_moe_config(dir + "/config.json")), checkpoint_(Checkpoint::open(dir)) {
  check_tensors(dir);
}

Qwen3MoeFamilyCheckpoint::Qwen3MoeFamilyCheckpoint(const std::string& dir, const ShardOpener& opener)
    : config_(read_qwen3_moe_config(dir + "/config.json")), checkpoint_(Checkpoint::open_remote(dir, opener)) {
  check_tensors(dir);
}

void Qwen3MoeFamilyCheckpoint::check_tensors(const std::string& dir) const {
  // Every tensor the architecture has, of the right dtype and shape, and no other.
  for (const TensorSpec& t : qwen3_moe_tensor_specs(config_)) {
    TensorRef ref = checkpoint_.find(t.name);
    if (!ref) fail(dir, ": tensor '", t.name, "' is missing");
    if (ref.info->dtype != t.dtype || ref.info->shape != t.shape)
      fail(ref.shard->path(), ": tensor '", t.name, "' is ", dtype_name(ref.info->dtype), " of another shape than config.json gives");
  }
  check_no_unknown_qwen3_moe_tensors(config_, checkpoint_);
}

std::vector<RecordPart> qwen3_moe_record_layout(const Qwen3MoeConfig& c) {
  if (c.moe_layers().empty()) fail("Qwen3-MoE config: no sparse layer, so no expert record");
  const int64_t l = c.moe_layers().front();
  const std::vector<std::string> names = qwen3_moe_expert_tensor_names(l, 0);
  const uint64_t d = c.base.hidden_size, I = c.moe_intermediate_size;
  const std::string prefix = cat("model.layers.", l, ".mlp.experts.0.");
  return record_parts({{names[0], DType::BF16, {I, d}}, {names[1], DType::BF16, {I, d}}, {names[2], DType::BF16, {d, I}}},
                      prefix);
}

std::vector<RecordPart> Qwen3MoeFamilyCheckpoint::record_layout() const { return qwen3_moe_record_layout(config_); }

std::vector<uint8_t> Qwen3MoeFamilyCheckpoint::read_expert_record(int64_t layer, int64_t expert) const {
  return read_qwen3_moe_expert_record(config_, checkpoint_, layer, expert);
}

std::vector<SpineTensorSpec> Qwen3MoeFamilyCheckpoint::spine_tensors() const {
  std::vector<SpineTensorSpec> out;
  const std::string layers = "model.layers.";
  for (const TensorSpec& t : qwen3_moe_spine_specs(config_)) {
    const int64_t layer = t.name.rfind(layers, 0) == 0 ? std::stoll(t.name.substr(layers.size())) : -1;
    // The loader reads rank-2 tensors as BF16 matrices, norms as fp32 vectors.
    out.push_back({t, layer, t.shape.size() == 2, false});
  }
  return out;
}

}  // namespace deltafin
