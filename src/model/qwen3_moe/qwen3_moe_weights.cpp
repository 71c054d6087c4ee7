#include "model/qwen3_moe/qwen3_moe_weights.h"

#include <set>

#include "model/qwen3/qwen3_weights.h"
#include "util/error.h"

namespace deltafin {

namespace {

std::string layer_name(int64_t i, const std::string& suffix) { return cat("model.layers.", i, ".", suffix); }

}  // namespace

std::vector<std::string> qwen3_moe_expert_tensor_names(int64_t l, int64_t e) {
  const std::string p = cat("mlp.experts.", e, ".");
  return {layer_name(l, p + "gate_proj.weight"), layer_name(l, p + "up_proj.weight"),
          layer_name(l, p + "down_proj.weight")};
}

namespace {

// The tensors of layer l; experts only when with_experts.
void append_layer_specs(const Qwen3MoeConfig& c, int64_t l, bool with_experts, std::vector<TensorSpec>& out) {
  const uint64_t d = c.base.hidden_size;
  append_qwen3_attention_specs(c.base, l, out);
  out.push_back({layer_name(l, "post_attention_layernorm.weight"), DType::BF16, {d}});
  if (c.is_moe_layer(l)) {
    const uint64_t E = c.num_experts, I = c.moe_intermediate_size;
    out.push_back({layer_name(l, "mlp.gate.weight"), DType::BF16, {E, d}});
    if (!with_experts) return;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::vector<std::string> n = qwen3_moe_expert_tensor_names(l, e);
      out.push_back({n[0], DType::BF16, {I, d}});
      out.push_back({n[1], DType::BF16, {I, d}});
      out.push_back({n[2], DType::BF16, {d, I}});
    }
  } else {
    const uint64_t I = c.base.intermediate_size;
    out.push_back({layer_name(l, "mlp.gate_proj.weight"), DType::BF16, {I, d}});
    out.push_back({layer_name(l, "mlp.up_proj.weight"), DType::BF16, {I, d}});
    out.push_back({layer_name(l, "mlp.down_proj.weight"), DType::BF16, {d, I}});
  }
}

std::vector<TensorSpec> specs(const Qwen3MoeConfig& c, bool with_experts) {
  const uint64_t d = c.base.hidden_size, V = c.base.vocab_size;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", DType::BF16, {V, d}});
  for (int64_t l = 0; l < c.base.num_hidden_layers; ++l) append_layer_specs(c, l, with_experts, out);
  out.push_back({"model.norm.weight", DType::BF16, {d}});
  if (!c.base.tie_word_embeddings) out.push_back({"lm_head.weight", DType::BF16, {V, d}});
  return out;
}

}  // namespace

std::vector<TensorSpec> qwen3_moe_tensor_specs(const Qwen3MoeConfig& c) { return specs(c, true); }
std::vector<TensorSpec> qwen3_moe_spine_specs(const Qwen3MoeConfig& c) { return specs(c, false); }

void check_no_unknown_qwen3_moe_tensors(const Qwen3MoeConfig& c, const Checkpoint& ck) {
  std::set<std::string> expected;
  for (const TensorSpec& t : qwen3_moe_tensor_specs(c)) expected.insert(t.name);
  for (const std::string& name : ck.names())
    if (!expected.count(name) && !(c.base.tie_word_embeddings && name == "lm_head.weight"))
      fail(ck.dir(), ": tensor '", name, "' is not part of the Qwen3-MoE architecture described by config.json");
}

Qwen3MoeWeights load_qwen3_moe_weights(const Qwen3MoeConfig& c, const Checkpoint& ck) {
  check_no_unknown_qwen3_moe_tensors(c, ck);

  CheckpointSpineSource source(ck);
  Qwen3MoeWeights w = load_qwen3_moe_weights(c, source);
  // Tied exports sometimes still save lm_head.weight; transformers ties it
  // anyway, so it is accepted only when it says the same thing.
  if (c.base.tie_word_embeddings && ck.find("lm_head.weight") && source.matrix("lm_head.weight").storage != w.embed.storage)
    fail(ck.dir(), ": config.json ties the embeddings (tie_word_embeddings = true) but lm_head.weight differs from "
                   "model.embed_tokens.weight");
  return w;
}

Qwen3MoeWeights load_qwen3_moe_weights(const Qwen3MoeConfig& c, SpineTensorSource& src) {
  const uint64_t d = c.base.hidden_size, V = c.base.vocab_size;
  Qwen3MoeWeights w;
  w.embed = spine_bf16_matrix(src, "model.embed_tokens.weight", V, d);
  w.layers.resize(static_cast<size_t>(c.base.num_hidden_layers));
  for (int64_t l = 0; l < c.base.num_hidden_layers; ++l) {
    Qwen3MoeLayerWeights& L = w.layers[static_cast<size_t>(l)];
    L.attn = load_qwen3_attention(c.base, src, l);
    L.post_attention_norm = spine_vector(src, layer_name(l, "post_attention_layernorm.weight"), d);
    if (c.is_moe_layer(l)) {
      L.router = spine_bf16_matrix(src, layer_name(l, "mlp.gate.weight"), c.num_experts, d);
    } else {
      const uint64_t I = c.base.intermediate_size;
      L.gate = spine_bf16_matrix(src, layer_name(l, "mlp.gate_proj.weight"), I, d);
      L.up = spine_bf16_matrix(src, layer_name(l, "mlp.up_proj.weight"), I, d);
      L.down = spine_bf16_matrix(src, layer_name(l, "mlp.down_proj.weight"), d, I);
    }
    w.bytes += qwen3_attention_bytes(L.attn) + L.post_attention_norm.size() * 4 + L.router.bytes() + L.gate.bytes() +
               L.up.bytes() + L.down.bytes();
  }
  w.final_norm = spine_vector(src, "model.norm.weight", d);
  if (!c.base.tie_word_embeddings) w.lm_head = spine_bf16_matrix(src, "lm_head.weight", V, d);
  w.bytes += w.embed.bytes() + w.lm_head.bytes() + w.final_norm.size() * 4;
  return w;
}

void read_qwen3_moe_expert_record_into(const Qwen3MoeConfig& c, const Checkpoint& ck, int64_t l, int64_t e,
                                       uint8_t* out) {
  if (l < 0 || l >= c.base.num_hidden_layers || !c.is_moe_layer(l) || e < 0 || e >= c.num_experts)
    fail(ck.dir(), ": no routed expert (layer ", l, ", expert ", e, ")");
  const uint64_t d = c.base.hidden_size, I = c.moe_intermediate_size, part = c.expert_tensor_bytes();
  const std::vector<std::string> names = qwen3_moe_expert_tensor_names(l, e);
  const std::vector<uint64_t> shapes[3] = {{I, d}, {I, d}, {d, I}};
  for (size_t i = 0; i < 3; ++i) {
    TensorRef ref = ck.find(names[i]);
    if (!ref) fail(ck.dir(), ": tensor '", names[i], "' is missing");
    if (ref.info->dtype != DType::BF16 || ref.info->shape != shapes[i])
      fail(ref.shard->path(), ": tensor '", names[i], "' is ", dtype_name(ref.info->dtype), " of another shape than [",
           shapes[i][0], ", ", shapes[i][1], "] BF16 from config.json");
    ref.shard->read(*ref.info, out + i * part);
  }
}

std::vector<uint8_t> read_qwen3_moe_expert_record(const Qwen3MoeConfig& c, const Checkpoint& ck, int64_t l,
                                                  int64_t e) {
  std::vector<uint8_t> record(c.expert_record_bytes());
  read_qwen3_moe_expert_record_into(c, ck, l, e, record.data());
  return record;
}

std::unique_ptr<ResidentExpertSource> load_resident_qwen3_moe_experts(const Qwen3MoeConfig& c, const Checkpoint& ck) {
  return std::make_unique<ResidentExpertSource>(
      c.base.num_hidden_layers, c.num_experts, c.moe_layers(), c.expert_record_bytes(),
      [&](int64_t l, int64_t e, uint8_t* out) { read_qwen3_moe_expert_record_into(c, ck, l, e, out); });
}

}  // namespace deltafin
