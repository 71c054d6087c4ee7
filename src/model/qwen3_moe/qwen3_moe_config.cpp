#include "model/qwen3_moe/qwen3_moe_config.h"

#include <nlohmann/json.hpp>

#include "model/common/config_fields.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

using nlohmann::json;

std::vector<int64_t> Qwen3MoeConfig::moe_layers() const {
  std::vector<int64_t> out;
  for (size_t l = 0; l < moe_layer.size(); ++l)
    if (moe_layer[l]) out.push_back(static_cast<int64_t>(l));
  return out;
}

Qwen3MoeConfig parse_qwen3_moe_config(const json& root, const std::string& source) {
  ConfigFields f(root, source);
  Qwen3MoeConfig c;
  const std::string model_type = f.string("model_type");
  if (model_type != "qwen3_moe")
    fail(source, ": field model_type = \"", model_type, "\", expected \"qwen3_moe\" (the Qwen3-MoE architecture)");
  if (f.has("architectures")) {
    const json& a = root.at("architectures");
    if (!a.is_array() || a.size() != 1 || a[0] != "Qwen3MoeForCausalLM")
      fail(source, ": field architectures = ", a.dump(), ", expected [\"Qwen3MoeForCausalLM\"]");
  }
  parse_qwen3_shared_fields(f, c.base);
  // The dense MLP width: released configs always write it (layers named in
  // mlp_only_layers use it); transformers' default is 6144.
  c.base.intermediate_size = f.has("intermediate_size") ? f.integer("intermediate_size", 1) : 6144;
  c.moe_intermediate_size = f.integer("moe_intermediate_size", 1);
  c.num_experts = f.integer("num_experts", 1);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 1);
  if (c.num_experts_per_tok > c.num_experts)
    fail(source, ": field num_experts_per_tok = ", c.num_experts_per_tok, " is more than num_experts = ", c.num_experts);
  c.decoder_sparse_step = f.has("decoder_sparse_step") ? f.integer("decoder_sparse_step", 1) : 1;
  c.norm_topk_prob = f.has("norm_topk_prob") ? f.boolean("norm_topk_prob") : false;
  if (f.has("mlp_only_layers")) {
    const json& m = root.at("mlp_only_layers");
    if (!m.is_array()) fail(source, ": field mlp_only_layers must be a list of layer indices, found ", m.dump());
    for (const json& x : m) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= c.base.num_hidden_layers)
        fail(source, ": field mlp_only_layers has an entry ", x.dump(), " that is not a layer index below ",
             c.base.num_hidden_layers);
      c.mlp_only_layers.push_back(x.get<int64_t>());
    }
  }
  // Shared experts are Qwen2-MoE's, not this architecture's: a config naming
  // them describes different tensors.
  f.only("shared_expert_intermediate_size", 0, "Qwen3-MoE has no shared expert");
  c.moe_layer.resize(static_cast<size_t>(c.base.num_hidden_layers));
  for (int64_t l = 0; l < c.base.num_hidden_layers; ++l)
    c.moe_layer[static_cast<size_t>(l)] = (l + 1) % c.decoder_sparse_step == 0;
  // Linear in layers + list entries (a long list is no quadratic scan).
  for (int64_t l : c.mlp_only_layers) c.moe_layer[static_cast<size_t>(l)] = false;
  if (c.moe_layers().empty())
    fail(source, ": no layer is sparse (decoder_sparse_step = ", c.decoder_sparse_step, ", mlp_only_layers ",
         root.contains("mlp_only_layers") ? root.at("mlp_only_layers").dump() : "[]",
         "): a model without routed experts is not Qwen3-MoE");
  f.collect_unused(c.unused_fields);
  return c;
}

Qwen3MoeConfig read_qwen3_moe_config(const std::string& path) {
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  return parse_qwen3_moe_config(j, path);
}

json qwen3_moe_config_json(const Qwen3MoeConfig& c) {
  json j = {{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"}};
  write_qwen3_shared_fields(c.base, j);
  j["intermediate_size"] = c.base.intermediate_size;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["num_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["decoder_sparse_step"] = c.decoder_sparse_step;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["mlp_only_layers"] = c.mlp_only_layers;
  // Training-only fields the released configs carry (listed as unused on read).
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = 0.001;
  return j;
}

}  // namespace deltafin
