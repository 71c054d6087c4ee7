// config.json of a Qwen3 dense checkpoint (Hugging Face `Qwen3ForCausalLM`,
// model_type "qwen3") -> typed configuration. Every dimension comes from the
// file; options the forward pass does not implement (RoPE scalings other than
// YaRN, attention bias, sliding windows, other activations, other weight
// types) are refused with an error naming the file and the field, so a
// checkpoint is never silently run with the wrong architecture. Qwen3-MoE
// (model/qwen3_moe) shares the attention half of this config and its parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/common/rope.h"

namespace deltafin {

class ConfigFields;

// YaRN scaling of the config's RoPE (model/common/rope.h).
using Qwen3Yarn = YarnScaling;

struct Qwen3Config {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // explicit in Qwen3 configs; may differ from hidden_size / num_attention_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;  // the KV cache never grows past this
  double rms_norm_eps = 0;
  double rope_theta = 0;
  Qwen3Yarn yarn;  // enabled only when the file asks for YaRN
  bool tie_word_embeddings = false;  // true: lm_head is model.embed_tokens.weight
  // Token ids from the file, -1 when absent or null (informational for callers).
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;

  // Fields present in the file that the runtime does not use.
  std::vector<std::string> unused_fields;

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t groups() const { return num_attention_heads / num_key_value_heads; }  // query heads per KV head
};

// Every field the dense and the MoE architectures share (all but model_type,
// architectures and the MLP sizes), read from `f` into `c`.
void parse_qwen3_shared_fields(ConfigFields& f, Qwen3Config& c);
// The same fields as config.json writes them (rope_scaling included).
void write_qwen3_shared_fields(const Qwen3Config& c, nlohmann::json& j);

// Parses and validates; `source` names the file in errors.
Qwen3Config parse_qwen3_config(const nlohmann::json& root, const std::string& source);
// Reads and parses a config.json file.
Qwen3Config read_qwen3_config(const std::string& path);

// The config.json a Hugging Face Qwen3 checkpoint with these values carries
// (the generator writes it; parse_qwen3_config(qwen3_config_json(c)) == c).
nlohmann::json qwen3_config_json(const Qwen3Config& c);

}  // namespace deltafin
