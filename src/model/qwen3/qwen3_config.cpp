#include "model/qwen3/qwen3_config.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/common/config_fields.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

using nlohmann::json;

namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

json rope_scaling_json(const Qwen3Config& c) {
  if (!c.yarn.enabled) return nullptr;
  json j{{"rope_type", "yarn"},
              {"factor", c.yarn.factor},
              {"original_max_position_embeddings", c.yarn.original_max_position_embeddings},
              {"beta_fast", c.yarn.beta_fast},
              {"beta_slow", c.yarn.beta_slow},
              {"attention_factor", c.yarn.attention_factor},
              {"truncate", c.yarn.truncate}};
  if (c.yarn.mscale > 0) j["mscale"] = c.yarn.mscale;
  if (c.yarn.mscale_all_dim > 0) j["mscale_all_dim"] = c.yarn.mscale_all_dim;
  return j;
}

}  // namespace

void parse_qwen3_shared_fields(ConfigFields& f, Qwen3Config& c) {
  const std::string& source = f.source();
  const json& root = f.object();
  c.hidden_size = f.integer("hidden_size", 1);
  c.num_hidden_layers = f.integer("num_hidden_layers", 1);
  c.num_attention_heads = f.integer("num_attention_heads", 1);
  c.num_key_value_heads = f.integer("num_key_value_heads", 1);
  // Hugging Face's Qwen3Config falls back to hidden_size / heads when head_dim
  // is absent or null; real Qwen3 configs always write it.
  if (f.has("head_dim")) {
    c.head_dim = f.integer("head_dim", 2);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(source, ": field head_dim is missing and hidden_size = ", c.hidden_size,
           " is not a multiple of num_attention_heads = ", c.num_attention_heads);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) fail(source, ": field head_dim = ", c.head_dim, " must be even (RoPE rotates pairs)");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(source, ": field num_attention_heads = ", c.num_attention_heads,
         " is not a multiple of num_key_value_heads = ", c.num_key_value_heads, " (grouped-query attention)");
  c.vocab_size = f.integer("vocab_size", 1, kNoLimit);
  if (c.vocab_size > (int64_t{1} << 32)) fail(source, ": field vocab_size = ", c.vocab_size, " does not fit 32-bit token ids");
  c.max_position_embeddings = f.integer("max_position_embeddings", 1, kNoLimit);
  c.rms_norm_eps = f.positive("rms_norm_eps");

  // RoPE: rotate-half with theta, plain or YaRN-scaled. Older transformers
  // write rope_theta and rope_scaling at the top level, newer ones one
  // rope_parameters object; either is accepted, and where both name theta
  // they must agree. Only one of rope_scaling and rope_parameters may scale.
  bool have_theta = false;
  if (f.has("rope_theta")) {
    c.rope_theta = f.positive("rope_theta");
    have_theta = true;
  }
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!f.has(key)) continue;
    if (c.yarn.enabled) fail(source, ": fields rope_scaling and rope_parameters both describe the RoPE scaling");
    double theta = 0;
    parse_rope_object(root.at(key), cat(source, ": field ", key), c.max_position_embeddings, c.yarn, &theta);
    if (theta > 0) {
      if (have_theta && theta != c.rope_theta)
        fail(source, ": field ", key, ".rope_theta = ", theta, " disagrees with rope_theta = ", c.rope_theta);
      c.rope_theta = theta;
      have_theta = true;
    }
  }
  if (!have_theta) fail(source, ": field rope_theta is missing");
  // The RoPE base: the pair frequencies are theta^(-2i/d), and YaRN divides by
  // ln(theta), so a base of 1 or less has no meaning (at 1 YaRN's bounds were
  // NaN and every position got the same rotation).
  if (!(c.rope_theta > 1)) fail(source, ": field rope_theta = ", c.rope_theta, ", expected a RoPE base > 1");

  // Defaults as in Hugging Face's Qwen3Config when the field is absent.
  c.tie_word_embeddings = f.has("tie_word_embeddings") ? f.boolean("tie_word_embeddings") : false;

  // The weights are BF16 (checked again per tensor at load).
  for (const char* key : {"torch_dtype", "dtype"})
    f.only(key, "bfloat16", "the weights must be bfloat16");
  f.only("attention_bias", false, "the q/k/v/o projections have no bias here");
  f.only("mlp_bias", false, "the MLP projections have no bias here");
  f.only("hidden_act", "silu", "the MLP is SwiGLU with silu");
  f.only("use_sliding_window", false, "every layer is full causal attention");
  if (f.has("layer_types")) {
    const json& t = root.at("layer_types");
    if (!t.is_array() || static_cast<int64_t>(t.size()) != c.num_hidden_layers)
      fail(source, ": field layer_types must list ", c.num_hidden_layers, " layers, found ", t.dump());
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] != "full_attention")
        fail(source, ": field layer_types[", i, "] = ", t[i].dump(), " is not supported (only \"full_attention\")");
  }
  // sliding_window and max_window_layers only matter when use_sliding_window is
  // true, which was refused above.
  f.has("sliding_window");
  f.has("max_window_layers");

  if (f.has("bos_token_id")) c.bos_token_id = f.integer("bos_token_id", 0, kNoLimit);
  if (f.has("eos_token_id")) c.eos_token_ids = f.token_ids("eos_token_id");
}

Qwen3Config parse_qwen3_config(const json& root, const std::string& source) {
  ConfigFields f(root, source);
  Qwen3Config c;

  // The architecture itself: a qwen2 or qwen3_moe config has different tensors.
  const std::string model_type = f.string("model_type");
  if (model_type != "qwen3")
    fail(source, ": field model_type = \"", model_type, "\", expected \"qwen3\" (the Qwen3 dense architecture)");
  if (f.has("architectures")) {
    const json& a = root.at("architectures");
    if (!a.is_array() || a.size() != 1 || a[0] != "Qwen3ForCausalLM")
      fail(source, ": field architectures = ", a.dump(), ", expected [\"Qwen3ForCausalLM\"]");
  }
  c.intermediate_size = f.integer("intermediate_size", 1);
  parse_qwen3_shared_fields(f, c);
  f.collect_unused(c.unused_fields);
  return c;
}

Qwen3Config read_qwen3_config(const std::string& path) {
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  return parse_qwen3_config(j, path);
}

void write_qwen3_shared_fields(const Qwen3Config& c, json& j) {
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["max_window_layers"] = c.num_hidden_layers;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c);
  j["sliding_window"] = nullptr;
  j["use_sliding_window"] = false;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = "bfloat16";
  j["use_cache"] = true;
  j["initializer_range"] = 0.02;
  j["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else if (c.eos_token_ids.empty())
    j["eos_token_id"] = nullptr;
  else
    j["eos_token_id"] = c.eos_token_ids;
}

json qwen3_config_json(const Qwen3Config& c) {
  json j = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"intermediate_size", c.intermediate_size}};
  write_qwen3_shared_fields(c, j);
  return j;
}

}  // namespace deltafin
