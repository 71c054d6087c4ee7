#include "model/qwen3/qwen3_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "util/error.h"
#include "util/file.h"

namespace deltafin {

using nlohmann::json;

namespace {

// Reads the root object's fields, remembering which were consumed so the rest
// can be listed as unused. Every error names the file and the field.
class Fields {
public:
  Fields(const json& obj, std::string source) : obj_(obj), source_(std::move(source)) {
    if (!obj_.is_object()) fail(source_, ": the root is not a JSON object");
  }

  // Present and not null.
  bool has(const std::string& key) {
    used_.insert(key);
    return obj_.contains(key) && !obj_.at(key).is_null();
  }
  const json& get(const std::string& key) {
    used_.insert(key);
    if (!obj_.contains(key)) fail(source_, ": field ", key, " is missing");
    return obj_.at(key);
  }
  int64_t integer(const std::string& key, int64_t min_value) {
    const json& v = get(key);
    if (!v.is_number_integer()) fail(source_, ": field ", key, " must be an integer, found ", v.dump());
    int64_t x = v.get<int64_t>();
    if (x < min_value) fail(source_, ": field ", key, " = ", x, ", expected >= ", min_value);
    return x;
  }
  // A positive finite number (rope_theta is often written as an integer).
  double positive(const std::string& key) {
    const json& v = get(key);
    if (!v.is_number()) fail(source_, ": field ", key, " must be a number, found ", v.dump());
    double x = v.get<double>();
    if (!std::isfinite(x) || !(x > 0)) fail(source_, ": field ", key, " = ", v.dump(), ", expected a finite number > 0");
    return x;
  }
  bool boolean(const std::string& key) {
    const json& v = get(key);
    if (!v.is_boolean()) fail(source_, ": field ", key, " must be true or false, found ", v.dump());
    return v.get<bool>();
  }
  std::string string(const std::string& key) {
    const json& v = get(key);
    if (!v.is_string()) fail(source_, ": field ", key, " must be a string, found ", v.dump());
    return v.get<std::string>();
  }
  // An optional field that, when present (and not null), must equal `expected`:
  // the options the forward pass does not implement.
  void only(const std::string& key, const json& expected, const char* why) {
    if (!has(key)) return;
    const json& v = obj_.at(key);
    if (v != expected) fail(source_, ": field ", key, " = ", v.dump(), " is not supported (", why, ")");
  }
  void collect_unused(std::vector<std::string>& out) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!used_.count(it.key())) out.push_back(it.key());
  }
  const std::string& source() const { return source_; }

private:
  const json& obj_;
  std::string source_;
  std::set<std::string> used_;
};

}  // namespace

Qwen3Config parse_qwen3_config(const json& root, const std::string& source) {
  Fields f(root, source);
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

  c.hidden_size = f.integer("hidden_size", 1);
  c.intermediate_size = f.integer("intermediate_size", 1);
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
  c.vocab_size = f.integer("vocab_size", 1);
  if (c.vocab_size > (int64_t{1} << 32)) fail(source, ": field vocab_size = ", c.vocab_size, " does not fit 32-bit token ids");
  c.max_position_embeddings = f.integer("max_position_embeddings", 1);
  c.rms_norm_eps = f.positive("rms_norm_eps");

  // RoPE: plain rotate-half with theta. Newer transformers write it inside
  // rope_parameters; either place is accepted, and both must agree.
  bool have_theta = false;
  if (f.has("rope_theta")) {
    c.rope_theta = f.positive("rope_theta");
    have_theta = true;
  }
  if (f.has("rope_parameters")) {
    const json& p = root.at("rope_parameters");
    if (!p.is_object()) fail(source, ": field rope_parameters must be an object, found ", p.dump());
    for (auto it = p.begin(); it != p.end(); ++it)
      if (it.key() != "rope_type" && it.key() != "rope_theta")
        fail(source, ": field rope_parameters.", it.key(), " is not supported (only default RoPE with rope_theta)");
    if (p.contains("rope_type") && p["rope_type"] != "default")
      fail(source, ": field rope_parameters.rope_type = ", p["rope_type"].dump(), " is not supported (only \"default\")");
    if (p.contains("rope_theta")) {
      if (!p["rope_theta"].is_number() || !(p["rope_theta"].get<double>() > 0))
        fail(source, ": field rope_parameters.rope_theta = ", p["rope_theta"].dump(), ", expected a number > 0");
      double t = p["rope_theta"].get<double>();
      if (have_theta && t != c.rope_theta)
        fail(source, ": field rope_parameters.rope_theta = ", t, " disagrees with rope_theta = ", c.rope_theta);
      c.rope_theta = t;
      have_theta = true;
    }
  }
  if (!have_theta) fail(source, ": field rope_theta is missing");
  // rope_scaling (YaRN, linear, dynamic ...) changes the frequencies; only none is implemented.
  if (f.has("rope_scaling"))
    fail(source, ": field rope_scaling = ", root.at("rope_scaling").dump(),
         " is not supported (only null: plain RoPE without scaling)");

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

  if (f.has("bos_token_id")) c.bos_token_id = f.integer("bos_token_id", 0);
  if (f.has("eos_token_id")) {
    const json& e = root.at("eos_token_id");
    if (e.is_number_integer() && e.get<int64_t>() >= 0) {
      c.eos_token_ids.push_back(e.get<int64_t>());
    } else if (e.is_array()) {
      for (const json& x : e) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0)
          fail(source, ": field eos_token_id has an entry ", x.dump(), " that is not a token id");
        c.eos_token_ids.push_back(x.get<int64_t>());
      }
    } else {
      fail(source, ": field eos_token_id = ", e.dump(), ", expected a token id or a list of them");
    }
  }
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

json qwen3_config_json(const Qwen3Config& c) {
  json j = {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"model_type", "qwen3"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"max_window_layers", c.num_hidden_layers},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"sliding_window", nullptr},
      {"use_sliding_window", false},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"initializer_range", 0.02},
  };
  j["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else if (c.eos_token_ids.empty())
    j["eos_token_id"] = nullptr;
  else
    j["eos_token_id"] = c.eos_token_ids;
  return j;
}

}  // namespace deltafin
