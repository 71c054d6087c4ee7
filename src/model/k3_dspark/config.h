// config.json of a DSpark draft model (k3-model.md §10.2) -> typed
// configuration. Every field of the released config is read (small DSpark
// checkpoints of §14 use the same code path with smaller dimensions); the fixed
// fields must have the released values, and every error names the file, the
// field, the value found and the rule expected. A second check,
// validate_dspark_for_target, ties the drafter to the K3 target it drafts for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/kimi_k3/config.h"

namespace deltafin {

// The proposal always runs this many query rows, [anchor, MASK x 6] (§10.2).
// The config has no field for it: it is part of how DSpark was trained.
inline constexpr int kDSparkQueryRows = 7;

// rope_parameters (YaRN) of the config.
struct DSparkRope {
  std::string rope_type;                      // "yarn"
  double factor = 0;                          // 32
  int64_t original_max_position_embeddings = 0;  // 32768
  double rope_theta = 0;                      // 50000 (= the root rope_theta)
  double beta_fast = 0, beta_slow = 0;        // 32, 1
  double mscale = 0, mscale_all_dim = 0;      // 1, 1
};

struct DSparkConfig {
  std::vector<std::string> architectures;  // ["K3DSparkModel"]
  std::string model_type;                  // "k3_dspark"
  int64_t hidden_size = 0;                 // h
  int64_t intermediate_size = 0;           // SwiGLU width
  int64_t num_hidden_layers = 0;           // DSpark layers (5)
  int64_t num_attention_heads = 0, num_key_value_heads = 0;
  int64_t q_lora_rank = 0, kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool mla_use_nope = false, mla_use_output_gate = false;
  int64_t vocab_size = 0;
  double rms_norm_eps = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 0;
  int64_t num_target_layers = 0, target_hidden_size = 0, target_num_hidden_layers = 0;
  std::vector<int64_t> target_layer_ids;  // 0-based K3 layers whose h is captured, ascending
  int64_t mask_token_id = 0, bos_token_id = 0, eos_token_id = 0, pad_token_id = 0;
  int64_t markov_rank = 0;
  std::string markov_head_type;  // "vanilla"
  bool enable_confidence_head = false, confidence_head_with_markov = false;
  bool tie_word_embeddings = false;
  int64_t draft_vocab_size = 0;
  std::string torchspec_version;  // "_torchspec_version"
  std::string torch_dtype;        // "bfloat16"
  DSparkRope rope;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t context_width() const { return num_target_layers * target_hidden_size; }  // captured row width
};

// Parses and checks the config on its own (fixed fields, positive dimensions,
// target_layer_ids consistent with num_target_layers and
// target_num_hidden_layers, YaRN parameters). `source` names the file in errors.
DSparkConfig parse_dspark_config(const nlohmann::json& root, const std::string& source);
DSparkConfig read_dspark_config(const std::string& config_json_path);

// The drafter must fit its target: hidden sizes, layer count, vocabulary and
// the reserved ids (bos/eos/pad, mask = the reserved base + 253, §8.1).
void validate_dspark_for_target(const DSparkConfig& config, const K3Config& target, const std::string& source);

}  // namespace deltafin
