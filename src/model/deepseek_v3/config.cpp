#include "model/deepseek_v3/config.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "model/common/config_fields.h"
#include "model/deepseek_v3/expert_record.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

using nlohmann::json;

namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// quantization_config: the FP8 releases' block format, or compressed-tensors'
// INT4 pack-quantized routed experts (Kimi K2-Thinking). Anything else is a
// format whose decode this runtime does not have.
DsQuant parse_quant(ConfigFields& f) {
  if (!f.has("quantization_config")) return DsQuant::None;
  const std::string where = cat(f.source(), ": field quantization_config");
  const json& q = f.get("quantization_config");
  if (!q.is_object() || !q.contains("quant_method") || !q.at("quant_method").is_string())
    fail(where, " has no quant_method");
  const std::string method = q.at("quant_method").get<std::string>();
  if (method == "fp8") {
    if (q.value("fmt", std::string("e4m3")) != "e4m3") fail(where, ".fmt = ", q.at("fmt").dump(), ", expected \"e4m3\"");
    if (q.contains("weight_block_size") && q.at("weight_block_size") != json::array({128, 128}))
      fail(where, ".weight_block_size = ", q.at("weight_block_size").dump(), ", expected [128, 128]");
    if (q.value("activation_scheme", std::string("dynamic")) != "dynamic")
      fail(where, ".activation_scheme = ", q.at("activation_scheme").dump(), ", expected \"dynamic\"");
    return DsQuant::Fp8Block;
  }
  if (method == "compressed-tensors") {
    if (q.value("format", std::string()) != "pack-quantized")
      fail(where, ".format = ", q.value("format", json()).dump(), ", expected \"pack-quantized\" (INT4 experts)");
    const json groups = q.value("config_groups", json::object());
    if (!groups.is_object() || groups.size() != 1) fail(where, ".config_groups must hold exactly one group");
    const json& w = groups.begin().value().value("weights", json());
    const bool int4 = w.is_object() && w.value("num_bits", 0) == 4 && w.value("type", std::string()) == "int" &&
                      w.value("symmetric", false) && w.value("strategy", std::string()) == "group" &&
                      w.value("group_size", 0) == 32;
    if (!int4)
      fail(where, ".config_groups.", groups.begin().key(), ".weights = ", w.dump(),
           ", expected symmetric INT4 with group_size 32 (num_bits 4, type int, strategy group)");
    return DsQuant::Int4Experts;
  }
  fail(where, ".quant_method = \"", method, "\" is not supported (\"fp8\" or \"compressed-tensors\")");
}

}  // namespace

const char* ds_quant_name(DsQuant q) {
  switch (q) {
    case DsQuant::None: return "bf16";
    case DsQuant::Fp8Block: return "fp8 e4m3, 128x128 block scales";
    case DsQuant::Int4Experts: return "int4 experts (group 32, bf16 scales)";
  }
  return "?";
}

std::vector<int64_t> DeepseekV3Config::moe_layers() const {
  std::vector<int64_t> out;
  for (int64_t l = first_k_dense_replace; l < num_hidden_layers; ++l) out.push_back(l);
  return out;
}

float DeepseekV3Config::softmax_scale() const {
  double s = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (yarn.enabled && yarn.mscale_all_dim > 0) {
    const double m = yarn_get_mscale(yarn.factor, yarn.mscale_all_dim);
    s = s * m * m;
  }
  return static_cast<float>(s);
}

uint64_t DeepseekV3Config::expert_record_bytes() const { return ds_expert_layout(*this).bytes; }

DeepseekV3Config parse_deepseek_v3_config(const json& root, const std::string& source) {
  ConfigFields f(root, source);
  DeepseekV3Config c;
  c.model_type = f.string("model_type");
  if (c.model_type != "deepseek_v3" && c.model_type != "kimi_k2")
    fail(source, ": field model_type = \"", c.model_type, "\", expected \"deepseek_v3\" or \"kimi_k2\"");
  if (f.has("architectures")) {
    const json& a = root.at("architectures");
    if (!a.is_array() || a.size() != 1 || a[0] != "DeepseekV3ForCausalLM")
      fail(source, ": field architectures = ", a.dump(), ", expected [\"DeepseekV3ForCausalLM\"]");
  }
  // Routing and layer-kind fields are required: every release writes them,
  // and transformers' defaults (DeepSeek V3's values) would silently give
  // another model the wrong routing.
  c.hidden_size = f.integer("hidden_size", 1);
  c.intermediate_size = f.integer("intermediate_size", 1);
  c.moe_intermediate_size = f.integer("moe_intermediate_size", 1);
  c.num_hidden_layers = f.integer("num_hidden_layers", 1);
  c.num_attention_heads = f.integer("num_attention_heads", 1);
  if (f.has("num_key_value_heads") && f.integer("num_key_value_heads", 1) != c.num_attention_heads)
    fail(source, ": field num_key_value_heads must equal num_attention_heads (MLA has one latent for every head)");
  c.q_lora_rank = f.has("q_lora_rank") ? f.integer("q_lora_rank", 1) : 0;  // null: plain q_proj
  c.kv_lora_rank = f.integer("kv_lora_rank", 1);
  c.qk_nope_head_dim = f.integer("qk_nope_head_dim", 1);
  c.qk_rope_head_dim = f.integer("qk_rope_head_dim", 2);
  if (c.qk_rope_head_dim % 2 != 0)
    fail(source, ": field qk_rope_head_dim = ", c.qk_rope_head_dim, " must be even (RoPE rotates pairs)");
  c.v_head_dim = f.integer("v_head_dim", 1);
  c.n_routed_experts = f.integer("n_routed_experts", 1);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 1);
  if (c.num_experts_per_tok > c.n_routed_experts)
    fail(source, ": field num_experts_per_tok = ", c.num_experts_per_tok, " is more than n_routed_experts = ",
         c.n_routed_experts);
  c.n_shared_experts = f.integer("n_shared_experts", 0);
  c.n_group = f.integer("n_group", 1);
  c.topk_group = f.integer("topk_group", 1);
  if (c.n_routed_experts % c.n_group != 0)
    fail(source, ": field n_routed_experts = ", c.n_routed_experts, " is not a multiple of n_group = ", c.n_group);
  if (c.topk_group > c.n_group)
    fail(source, ": field topk_group = ", c.topk_group, " is more than n_group = ", c.n_group);
  if (c.n_group > 1 && c.n_routed_experts / c.n_group < 2)
    fail(source, ": n_group = ", c.n_group, " leaves fewer than 2 experts per group (a group scores its top two)");
  if (c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group))
    fail(source, ": field num_experts_per_tok = ", c.num_experts_per_tok, " is more than the ",
         c.topk_group * (c.n_routed_experts / c.n_group), " experts of the topk_group kept groups");
  c.first_k_dense_replace = f.integer("first_k_dense_replace", 0);
  if (c.first_k_dense_replace >= c.num_hidden_layers)
    fail(source, ": field first_k_dense_replace = ", c.first_k_dense_replace, " leaves no MoE layer of ",
         c.num_hidden_layers);
  c.norm_topk_prob = f.boolean("norm_topk_prob");
  c.routed_scaling_factor = f.positive("routed_scaling_factor");
  c.vocab_size = f.integer("vocab_size", 1, kNoLimit);
  if (c.vocab_size > (int64_t{1} << 32)) fail(source, ": field vocab_size = ", c.vocab_size, " does not fit 32-bit token ids");
  c.max_position_embeddings = f.integer("max_position_embeddings", 1, kNoLimit);
  c.rms_norm_eps = f.positive("rms_norm_eps");
  c.rope_theta = f.positive("rope_theta");
  if (!(c.rope_theta > 1)) fail(source, ": field rope_theta = ", c.rope_theta, ", expected a RoPE base > 1");
  if (f.has("rope_scaling")) {
    double theta = 0;
    parse_rope_object(root.at("rope_scaling"), cat(source, ": field rope_scaling"), c.max_position_embeddings, c.yarn,
                      &theta);
    if (theta > 0 && theta != c.rope_theta)
      fail(source, ": field rope_scaling.rope_theta = ", theta, " disagrees with rope_theta = ", c.rope_theta);
  }
  c.num_nextn_predict_layers = f.has("num_nextn_predict_layers") ? f.integer("num_nextn_predict_layers", 0, 1) : 0;
  if (f.has("bos_token_id")) c.bos_token_id = f.integer("bos_token_id", 0, kNoLimit);
  if (f.has("eos_token_id")) c.eos_token_ids = f.token_ids("eos_token_id");
  c.quant = parse_quant(f);

  // What the forward pass implements, and nothing else.
  f.only("hidden_act", "silu", "the MLPs are SwiGLU with silu");
  f.only("scoring_func", "sigmoid", "the router scores with a sigmoid");
  f.only("topk_method", "noaux_tc", "routing is the bias-corrected grouped top-k (noaux_tc)");
  f.only("moe_layer_freq", 1, "every layer from first_k_dense_replace on is MoE");
  f.only("attention_bias", false, "the projections have no bias");
  f.only("tie_word_embeddings", false, "lm_head is its own tensor");
  f.only("rope_interleave", true, "q_pe and k_pe rotate interleaved pairs, as DeepSeek's release");
  for (const char* key : {"torch_dtype", "dtype"}) f.only(key, "bfloat16", "the unquantized weights are bfloat16");
  f.collect_unused(c.unused_fields);
  return c;
}

DeepseekV3Config read_deepseek_v3_config(const std::string& path) {
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  return parse_deepseek_v3_config(j, path);
}

}  // namespace deltafin
