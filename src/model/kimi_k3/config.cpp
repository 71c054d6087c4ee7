#include "model/kimi_k3/config.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "model/common/config_fields.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

using nlohmann::json;

namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
// Token ids are 32-bit (the tokenizer's reserved ids follow its ranks).
constexpr int64_t kMaxVocab = int64_t{1} << 32;

// Reads fields of one JSON object, remembering which ones were consumed so the
// rest can be reported as unused. `prefix` is the field path for messages.
class FieldReader {
public:
  FieldReader(const json& obj, std::string where, std::string prefix)
      : obj_(obj), where_(std::move(where)), prefix_(std::move(prefix)) {
    if (!obj_.is_object()) fail(where_, ": ", prefix_.empty() ? "root" : prefix_, " is not a JSON object");
  }

  std::string path(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  const json& get(const std::string& key) {
    used_.insert(key);
    if (!obj_.contains(key)) fail(where_, ": field ", path(key), " is missing");
    return obj_.at(key);
  }
  bool has(const std::string& key) const { return obj_.contains(key); }

  // An integer in [min_value, max_value]; dimensions and counts are at most
  // kMaxConfigSize (model/common/config_fields.h).
  int64_t integer(const std::string& key, int64_t min_value = 1, int64_t max_value = kMaxConfigSize) {
    const json& v = get(key);
    if (!v.is_number_integer()) fail(where_, ": field ", path(key), " must be an integer, found ", v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max_value))
      fail(where_, ": field ", path(key), " = ", v.dump(), ", expected <= ", max_value);
    int64_t x = v.get<int64_t>();
    if (x < min_value) fail(where_, ": field ", path(key), " = ", x, ", expected >= ", min_value);
    if (x > max_value) fail(where_, ": field ", path(key), " = ", x, ", expected <= ", max_value);
    return x;
  }
  double number(const std::string& key) {
    const json& v = get(key);
    if (!v.is_number()) fail(where_, ": field ", path(key), " must be a number, found ", v.dump());
    double x = v.get<double>();
    if (!std::isfinite(x)) fail(where_, ": field ", path(key), " is not finite");
    return x;
  }
  std::vector<int64_t> int_list(const std::string& key) {
    const json& v = get(key);
    if (!v.is_array()) fail(where_, ": field ", path(key), " must be an array of integers, found ", v.dump());
    std::vector<int64_t> out;
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(where_, ": field ", path(key), " has a non-integer entry ", e.dump());
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  // A fixed field: must be present with exactly this value.
  void expect(const std::string& key, const json& expected) {
    const json& v = get(key);
    bool same = (v == expected);
    // 1 and 1.0 are the same value for a numeric field.
    if (!same && v.is_number() && expected.is_number()) same = v.get<double>() == expected.get<double>();
    if (!same)
      fail(where_, ": field ", path(key), " = ", v.dump(), ", but the runtime only supports ", expected.dump());
  }
  void collect_unused(std::vector<std::string>& out) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!used_.count(it.key())) out.push_back(path(it.key()));
  }

private:
  const json& obj_;
  std::string where_, prefix_;
  std::set<std::string> used_;
};

void check_quantization(const json& q, const std::string& where, const std::string& field) {
  FieldReader r(q, where, field);
  json want = k3_quantization_config();
  r.expect("quant_method", want["quant_method"]);
  r.expect("format", want["format"]);
  r.expect("quantization_status", want["quantization_status"]);
  const json& groups = r.get("config_groups");
  FieldReader g(groups, where, field + ".config_groups");
  FieldReader g0(g.get("group_0"), where, field + ".config_groups.group_0");
  FieldReader w(g0.get("weights"), where, field + ".config_groups.group_0.weights");
  for (auto it = want["config_groups"]["group_0"]["weights"].begin();
       it != want["config_groups"]["group_0"]["weights"].end(); ++it)
    w.expect(it.key(), it.value());
}

// Layer lists are 1-based, sorted, disjoint, and together cover 1..L once.
std::vector<LayerKind> derive_layer_kinds(const K3Config& c, const std::string& where) {
  std::vector<int> owner(static_cast<size_t>(c.num_hidden_layers) + 1, -1);
  auto place = [&](const std::vector<int64_t>& list, int kind, const char* name) {
    for (size_t i = 0; i < list.size(); ++i) {
      int64_t l = list[i];
      if (l < 1 || l > c.num_hidden_layers)
        fail(where, ": text_config.linear_attn_config.", name, " has layer ", l, " outside 1..", c.num_hidden_layers,
             " (the lists are 1-based)");
      if (i > 0 && l <= list[i - 1]) fail(where, ": text_config.linear_attn_config.", name, " is not sorted ascending at ", l);
      if (owner[l] >= 0)
        fail(where, ": layer ", l, " (1-based) is in both full_attn_layers and kda_layers");
      owner[l] = kind;
    }
  };
  place(c.full_attn_layers, 1, "full_attn_layers");
  place(c.kda_layers, 0, "kda_layers");
  std::vector<LayerKind> kinds;
  for (int64_t l = 1; l <= c.num_hidden_layers; ++l) {
    if (owner[l] < 0)
      fail(where, ": layer ", l, " (1-based) is in neither full_attn_layers nor kda_layers; together they must cover 1..",
           c.num_hidden_layers);
    kinds.push_back(owner[l] == 1 ? LayerKind::MLA : LayerKind::KDA);
  }
  return kinds;
}

void require(bool ok, const std::string& where, const std::string& what) {
  if (!ok) fail(where, ": ", what);
}

}  // namespace

json k3_quantization_config() {
  return json{{"quant_method", "compressed-tensors"},
              {"format", "mxfp4-pack-quantized"},
              {"quantization_status", "compressed"},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}},
                  {"weights",
                   {{"num_bits", 4},
                    {"group_size", 32},
                    {"type", "float"},
                    {"strategy", "group"},
                    {"symmetric", true},
                    {"dynamic", false},
                    {"observer", "minmax"},
                    {"scale_dtype", "torch.uint8"}}}}}}},
              {"ignore", {"re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|down)_proj.*",
                          "re:.*block_sparse_moe\\.gate.*", "re:.*routed_expert_(down|up)_proj.*", "lm_head",
                          "re:vision_tower.*", "re:mm_projector.*"}}};
}

K3Config parse_k3_config(const json& root_json, const std::string& where) {
  K3Config c;
  FieldReader root(root_json, where, "");
  root.expect("model_type", "kimi_k3");
  root.expect("dtype", "bfloat16");
  root.expect("tie_word_embeddings", false);
  FieldReader t(root.get("text_config"), where, "text_config");

  t.expect("model_type", "kimi_linear");
  t.expect("dtype", "bfloat16");
  t.expect("mla_use_nope", true);
  t.expect("mla_use_output_gate", true);
  t.expect("first_k_dense_replace", 1);
  t.expect("moe_layer_freq", 1);
  t.expect("num_expert_group", 1);
  t.expect("topk_group", 1);
  t.expect("use_grouped_topk", true);
  t.expect("topk_method", "noaux_tc");
  t.expect("moe_router_activation_func", "sigmoid");
  t.expect("moe_renormalize", true);
  t.expect("routed_scaling_factor", 1.0);
  t.expect("latent_moe_use_norm", true);
  t.expect("hidden_act", "situ");
  t.expect("num_nextn_predict_layers", 0);
  t.expect("tie_word_embeddings", false);

  // quantization_config: read from text_config (where the spec lists it) or
  // the root (where Hugging Face tooling also looks); if both, they must agree.
  bool q_text = t.has("quantization_config"), q_root = root.has("quantization_config");
  require(q_text || q_root, where, "field text_config.quantization_config is missing (the MXFP4 experts need it)");
  if (q_text) check_quantization(t.get("quantization_config"), where, "text_config.quantization_config");
  if (q_root) check_quantization(root.get("quantization_config"), where, "quantization_config");
  if (q_text && q_root && root_json["quantization_config"] != root_json["text_config"]["quantization_config"])
    fail(where, ": quantization_config and text_config.quantization_config differ");

  c.hidden_size = t.integer("hidden_size");
  c.num_hidden_layers = t.integer("num_hidden_layers", 2);
  c.attn_res_block_size = t.integer("attn_res_block_size");
  c.vocab_size = t.integer("vocab_size", 257, kMaxVocab);
  c.intermediate_size = t.integer("intermediate_size");
  c.num_experts = t.integer("num_experts");
  c.num_experts_per_token = t.integer("num_experts_per_token");
  c.routed_expert_hidden_size = t.integer("routed_expert_hidden_size");
  c.moe_intermediate_size = t.integer("moe_intermediate_size");
  c.num_shared_experts = t.integer("num_shared_experts");
  c.num_attention_heads = t.integer("num_attention_heads");
  int64_t kv_heads = t.integer("num_key_value_heads");
  c.q_lora_rank = t.integer("q_lora_rank");
  c.kv_lora_rank = t.integer("kv_lora_rank");
  c.qk_nope_head_dim = t.integer("qk_nope_head_dim");
  c.qk_rope_head_dim = t.integer("qk_rope_head_dim", 0);
  c.v_head_dim = t.integer("v_head_dim");
  c.situ_beta = t.number("activation_situ_beta");
  c.situ_linear_beta = t.number("activation_situ_linear_beta");
  c.rms_norm_eps = t.number("rms_norm_eps");
  c.bos_token_id = t.integer("bos_token_id", 0, kNoLimit);
  c.eos_token_id = t.integer("eos_token_id", 0, kNoLimit);
  c.pad_token_id = t.integer("pad_token_id", 0, kNoLimit);
  c.max_position_embeddings = t.integer("max_position_embeddings", 1, kNoLimit);

  FieldReader la(t.get("linear_attn_config"), where, "text_config.linear_attn_config");
  la.expect("use_full_rank_gate", true);
  c.kda_num_heads = la.integer("num_heads");
  c.kda_head_dim = la.integer("head_dim");
  c.short_conv_kernel_size = la.integer("short_conv_kernel_size");
  c.gate_lower_bound = la.number("gate_lower_bound");
  c.full_attn_layers = la.int_list("full_attn_layers");
  c.kda_layers = la.int_list("kda_layers");

  // Root copies of the special ids must agree with text_config's.
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    int64_t r = root.integer(key, 0, kNoLimit);
    int64_t tv = root_json["text_config"][key].get<int64_t>();
    if (r != tv) fail(where, ": field ", key, " = ", r, " but text_config.", key, " = ", tv, "; they must agree");
  }

  // Structural invariants (§2.4).
  require(kv_heads == c.num_attention_heads, where,
          cat("field text_config.num_key_value_heads = ", kv_heads, ", expected num_attention_heads = ",
              c.num_attention_heads, " (MLA has one KV head per query head)"));
  require(c.num_experts_per_token <= c.num_experts, where,
          cat("field text_config.num_experts_per_token = ", c.num_experts_per_token, ", expected <= num_experts = ",
              c.num_experts));
  require(c.routed_expert_hidden_size % 32 == 0, where,
          cat("field text_config.routed_expert_hidden_size = ", c.routed_expert_hidden_size,
              ", expected a multiple of 32 (MXFP4 groups)"));
  require(c.moe_intermediate_size % 32 == 0, where,
          cat("field text_config.moe_intermediate_size = ", c.moe_intermediate_size,
              ", expected a multiple of 32 (MXFP4 groups)"));
  require(c.gate_lower_bound < 0, where,
          cat("field text_config.linear_attn_config.gate_lower_bound = ", c.gate_lower_bound,
              ", expected a negative number (the decay gate must stay below 0)"));
  require(c.rms_norm_eps > 0, where, cat("field text_config.rms_norm_eps = ", c.rms_norm_eps, ", expected > 0"));
  require(c.situ_beta > 0 && c.situ_linear_beta > 0, where,
          "fields text_config.activation_situ_beta and activation_situ_linear_beta must be > 0");
  const int64_t base = c.reserved_base();
  require(c.bos_token_id == base, where,
          cat("field text_config.bos_token_id = ", c.bos_token_id, ", expected the 1st reserved id ", base,
              " (vocab_size - 256)"));
  require(c.eos_token_id == base + 2, where,
          cat("field text_config.eos_token_id = ", c.eos_token_id, ", expected the 3rd reserved id ", base + 2));
  require(c.pad_token_id == base + 255, where,
          cat("field text_config.pad_token_id = ", c.pad_token_id, ", expected the last reserved id ", base + 255));
  c.layer_kinds = derive_layer_kinds(c, where);

  // Fields the runtime does not use: reported, never silently relied on.
  // (rope_theta / rope_scaling land here too: the target is NoPE.)
  root.collect_unused(c.unused_fields);
  t.collect_unused(c.unused_fields);
  la.collect_unused(c.unused_fields);
  return c;
}

K3Config load_k3_config(const std::string& path) {
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  return parse_k3_config(j, path);
}

}  // namespace deltafin
