#include "model/k3_dspark/config.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "format/tokenizer_config.h"
#include "model/common/config_fields.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

using nlohmann::json;

namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
// Token ids are 32-bit, as the target's.
constexpr int64_t kMaxVocab = int64_t{1} << 32;

// Reads the fields of one JSON object; `prefix` is the field path in messages
// ("rope_parameters" for the nested object). Every message has the form
// "<source>: field <path> ..." so a user sees which file and field to fix.
class Fields {
public:
  Fields(const json& obj, const std::string& source, const std::string& prefix)
      : obj_(obj), source_(source), prefix_(prefix) {
    if (!obj_.is_object()) fail(source_, ": ", prefix_.empty() ? "root" : "field " + prefix_, " is not a JSON object");
  }

  std::string path(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  const json& get(const std::string& key) const {
    if (!obj_.contains(key)) fail(source_, ": field ", path(key), " is missing");
    return obj_.at(key);
  }

  // An integer in [min_value, max_value]; dimensions and counts are at most
  // kMaxConfigSize (model/common/config_fields.h).
  int64_t integer(const std::string& key, int64_t min_value, int64_t max_value = kMaxConfigSize) const {
    const json& v = get(key);
    if (!v.is_number_integer()) fail(source_, ": field ", path(key), " must be an integer, found ", v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max_value))
      fail(source_, ": field ", path(key), " = ", v.dump(), ", expected <= ", max_value);
    int64_t x = v.get<int64_t>();
    if (x < min_value) fail(source_, ": field ", path(key), " = ", x, ", expected >= ", min_value);
    if (x > max_value) fail(source_, ": field ", path(key), " = ", x, ", expected <= ", max_value);
    return x;
  }

  // Any JSON number (the real config writes beta_fast as 32, rope_theta as 50000.0).
  double number(const std::string& key) const {
    const json& v = get(key);
    if (!v.is_number()) fail(source_, ": field ", path(key), " must be a number, found ", v.dump());
    double x = v.get<double>();
    if (!std::isfinite(x)) fail(source_, ": field ", path(key), " is not finite");
    return x;
  }

  double positive(const std::string& key) const {
    double x = number(key);
    if (!(x > 0)) fail(source_, ": field ", path(key), " = ", get(key).dump(), ", expected > 0");
    return x;
  }

  std::string string(const std::string& key) const {
    const json& v = get(key);
    if (!v.is_string()) fail(source_, ": field ", path(key), " must be a string, found ", v.dump());
    return v.get<std::string>();
  }

  bool boolean(const std::string& key) const {
    const json& v = get(key);
    if (!v.is_boolean()) fail(source_, ": field ", path(key), " must be true or false, found ", v.dump());
    return v.get<bool>();
  }

  std::vector<int64_t> int_list(const std::string& key) const {
    const json& v = get(key);
    if (!v.is_array()) fail(source_, ": field ", path(key), " must be an array of integers, found ", v.dump());
    std::vector<int64_t> out;
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(source_, ": field ", path(key), " has a non-integer entry ", e.dump());
      out.push_back(e.get<int64_t>());
    }
    return out;
  }

  // A fixed field: what DSpark was trained with; anything else is another model.
  void expect(const std::string& key, const json& expected) const {
    const json& v = get(key);
    if (v != expected)
      fail(source_, ": field ", path(key), " = ", v.dump(), ", but a DSpark drafter has ", expected.dump());
  }

private:
  const json& obj_;
  const std::string& source_;
  std::string prefix_;
};

}  // namespace

DSparkConfig parse_dspark_config(const json& root, const std::string& source) {
  DSparkConfig c;
  Fields f(root, source, "");
  f.expect("architectures", json::array({"K3DSparkModel"}));
  f.expect("model_type", "k3_dspark");
  c.architectures = {"K3DSparkModel"};
  c.model_type = "k3_dspark";
  c.hidden_size = f.integer("hidden_size", 1);
  c.intermediate_size = f.integer("intermediate_size", 1);
  c.num_hidden_layers = f.integer("num_hidden_layers", 1);
  c.num_attention_heads = f.integer("num_attention_heads", 1);
  c.num_key_value_heads = f.integer("num_key_value_heads", 1);
  if (c.num_key_value_heads != c.num_attention_heads)
    fail(source, ": field num_key_value_heads = ", c.num_key_value_heads, ", expected num_attention_heads (",
         c.num_attention_heads, "): MLA has one latent shared by all heads");
  c.q_lora_rank = f.integer("q_lora_rank", 1);
  c.kv_lora_rank = f.integer("kv_lora_rank", 1);
  c.qk_nope_head_dim = f.integer("qk_nope_head_dim", 1);
  c.qk_rope_head_dim = f.integer("qk_rope_head_dim", 2);
  if (c.qk_rope_head_dim % 2 != 0)
    fail(source, ": field qk_rope_head_dim = ", c.qk_rope_head_dim, ", expected an even number (rotated in pairs)");
  c.v_head_dim = f.integer("v_head_dim", 1);
  // DSpark's MLA is the rotary, ungated kind (unlike the target's NoPE, gated MLA).
  f.expect("mla_use_nope", false);
  f.expect("mla_use_output_gate", false);
  c.mla_use_nope = false;
  c.mla_use_output_gate = false;
  c.vocab_size = f.integer("vocab_size", 257, kMaxVocab);
  c.rms_norm_eps = f.positive("rms_norm_eps");
  c.max_position_embeddings = f.integer("max_position_embeddings", 1, kNoLimit);
  c.rope_theta = f.positive("rope_theta");
  // YaRN divides by ln(theta): a base of 1 or less rotates nothing sensible.
  if (!(c.rope_theta > 1))
    fail(source, ": field rope_theta = ", f.get("rope_theta").dump(), ", expected > 1 (the rotary base)");
  c.num_target_layers = f.integer("num_target_layers", 1);
  c.target_hidden_size = f.integer("target_hidden_size", 1);
  c.target_num_hidden_layers = f.integer("target_num_hidden_layers", 1);
  c.target_layer_ids = f.int_list("target_layer_ids");
  if (static_cast<int64_t>(c.target_layer_ids.size()) != c.num_target_layers)
    fail(source, ": field target_layer_ids has ", c.target_layer_ids.size(), " entries, expected num_target_layers = ",
         c.num_target_layers);
  for (size_t i = 0; i < c.target_layer_ids.size(); ++i) {
    int64_t id = c.target_layer_ids[i];
    if (id < 0 || id >= c.target_num_hidden_layers)
      fail(source, ": field target_layer_ids has layer ", id, " outside 0..", c.target_num_hidden_layers - 1,
           " (0-based layers of the target)");
    if (i > 0 && id <= c.target_layer_ids[i - 1])
      fail(source, ": field target_layer_ids is not strictly ascending at ", id);
  }
  c.mask_token_id = f.integer("mask_token_id", 0, kNoLimit);
  c.bos_token_id = f.integer("bos_token_id", 0, kNoLimit);
  c.eos_token_id = f.integer("eos_token_id", 0, kNoLimit);
  c.pad_token_id = f.integer("pad_token_id", 0, kNoLimit);
  c.markov_rank = f.integer("markov_rank", 1);
  f.expect("markov_head_type", "vanilla");
  c.markov_head_type = "vanilla";
  // The confidence head reads [out ‖ markov_w1[prev]]: both flags are part of the tensor list.
  f.expect("enable_confidence_head", true);
  f.expect("confidence_head_with_markov", true);
  c.enable_confidence_head = true;
  c.confidence_head_with_markov = true;
  f.expect("tie_word_embeddings", false);
  c.tie_word_embeddings = false;
  c.draft_vocab_size = f.integer("draft_vocab_size", 1, kMaxVocab);
  if (c.draft_vocab_size != c.vocab_size)
    fail(source, ": field draft_vocab_size = ", c.draft_vocab_size, ", expected vocab_size (", c.vocab_size,
         "): DSpark scores the full vocabulary with the target's lm_head");
  c.torchspec_version = f.string("_torchspec_version");
  f.expect("torch_dtype", "bfloat16");
  c.torch_dtype = "bfloat16";

  Fields r(f.get("rope_parameters"), source, "rope_parameters");
  r.expect("rope_type", "yarn");
  c.rope.rope_type = "yarn";
  c.rope.factor = r.number("factor");
  if (!(c.rope.factor >= 1))
    fail(source, ": field rope_parameters.factor = ", r.get("factor").dump(), ", expected >= 1");
  c.rope.original_max_position_embeddings = r.integer("original_max_position_embeddings", 1, kNoLimit);
  c.rope.rope_theta = r.positive("rope_theta");
  if (c.rope.rope_theta != c.rope_theta)
    fail(source, ": field rope_parameters.rope_theta = ", r.get("rope_theta").dump(), ", expected rope_theta (",
         f.get("rope_theta").dump(), ")");
  c.rope.beta_fast = r.positive("beta_fast");
  c.rope.beta_slow = r.positive("beta_slow");
  if (!(c.rope.beta_fast > c.rope.beta_slow))
    fail(source, ": field rope_parameters.beta_fast = ", r.get("beta_fast").dump(), ", expected > beta_slow (",
         r.get("beta_slow").dump(), ")");
  c.rope.mscale = r.number("mscale");
  c.rope.mscale_all_dim = r.number("mscale_all_dim");
  if (c.rope.mscale < 0) fail(source, ": field rope_parameters.mscale = ", r.get("mscale").dump(), ", expected >= 0");
  if (c.rope.mscale_all_dim < 0)
    fail(source, ": field rope_parameters.mscale_all_dim = ", r.get("mscale_all_dim").dump(), ", expected >= 0");
  return c;
}

DSparkConfig read_dspark_config(const std::string& path) {
  std::string text = read_text_file(path);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON (", e.what(), ")");
  }
  return parse_dspark_config(root, path);
}

void validate_dspark_for_target(const DSparkConfig& c, const K3Config& t, const std::string& source) {
  // The captured rows are the target's h, the embeddings are the target's and
  // the scores come from the target's lm_head: all three need the same width.
  if (c.target_hidden_size != t.hidden_size)
    fail(source, ": field target_hidden_size = ", c.target_hidden_size, ", but the target's hidden_size is ",
         t.hidden_size);
  if (c.hidden_size != t.hidden_size)
    fail(source, ": field hidden_size = ", c.hidden_size, ", but the target's hidden_size is ", t.hidden_size,
         " (DSpark uses the target's embedding and lm_head)");
  if (c.target_num_hidden_layers != t.num_hidden_layers)
    fail(source, ": field target_num_hidden_layers = ", c.target_num_hidden_layers,
         ", but the target has num_hidden_layers = ", t.num_hidden_layers);
  for (int64_t id : c.target_layer_ids)
    if (id < 0 || id >= t.num_hidden_layers)
      fail(source, ": field target_layer_ids has layer ", id, " outside the target's 0..", t.num_hidden_layers - 1);
  if (c.vocab_size != t.vocab_size)
    fail(source, ": field vocab_size = ", c.vocab_size, ", but the target's vocab_size is ", t.vocab_size);
  const int64_t base = t.reserved_base();
  const int64_t mask = base + reserved::kMask;
  if (c.mask_token_id != mask)
    fail(source, ": field mask_token_id = ", c.mask_token_id, ", expected ", mask,
         " (the target's reserved base + 253)");
  if (c.bos_token_id != t.bos_token_id)
    fail(source, ": field bos_token_id = ", c.bos_token_id, ", but the target's bos_token_id is ", t.bos_token_id);
  if (c.eos_token_id != t.eos_token_id)
    fail(source, ": field eos_token_id = ", c.eos_token_id, ", but the target's eos_token_id is ", t.eos_token_id);
  if (c.pad_token_id != t.pad_token_id)
    fail(source, ": field pad_token_id = ", c.pad_token_id, ", but the target's pad_token_id is ", t.pad_token_id);
}

}  // namespace deltafin
