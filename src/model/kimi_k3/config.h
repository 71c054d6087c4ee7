// config.json of a Kimi K3-architecture checkpoint -> typed configuration
// (k3-model.md §2). Every dimension is read from the file so small checkpoints
// of the same architecture load through the same code; structural invariants
// and the fixed fields are checked, and anything the runtime cannot honour is
// refused with an error naming the file, the field, the value found and the
// rule expected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace deltafin {

enum class LayerKind { KDA, MLA };

struct K3Config {
  // Dimensions (D) and scalar parameters (S), names as in config.json.
  int64_t hidden_size = 0;                // d
  int64_t num_hidden_layers = 0;          // L
  int64_t attn_res_block_size = 0;        // B
  int64_t vocab_size = 0;                 // V
  int64_t intermediate_size = 0;          // I_dense (layer 0)
  int64_t num_experts = 0;                // E
  int64_t num_experts_per_token = 0;      // k
  int64_t routed_expert_hidden_size = 0;  // d_lat
  int64_t moe_intermediate_size = 0;      // I_moe
  int64_t num_shared_experts = 0;         // S
  int64_t kda_num_heads = 0;              // H_kda
  int64_t kda_head_dim = 0;               // K
  int64_t short_conv_kernel_size = 0;
  double gate_lower_bound = 0;
  int64_t num_attention_heads = 0;  // H_mla (= num_key_value_heads)
  int64_t q_lora_rank = 0, kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  double situ_beta = 0, situ_linear_beta = 0;
  double rms_norm_eps = 0;
  int64_t bos_token_id = 0, eos_token_id = 0, pad_token_id = 0;
  int64_t max_position_embeddings = 0;  // informational: the context upper bound

  std::vector<int64_t> full_attn_layers, kda_layers;  // 1-based, as in the file
  std::vector<LayerKind> layer_kinds;                 // 0-based, derived

  // Fields present in the file that the runtime does not use (listed once at startup).
  std::vector<std::string> unused_fields;

  int64_t kda_dim() const { return kda_num_heads * kda_head_dim; }  // D_kda
  int64_t mla_qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t reserved_base() const { return vocab_size - 256; }  // first reserved id
  bool is_moe_layer(int64_t i) const { return i >= 1; }        // first_k_dense_replace = 1
};

// Parses and validates; `where` names the file in errors.
K3Config parse_k3_config(const nlohmann::json& root, const std::string& where);
K3Config load_k3_config(const std::string& config_json_path);

// The quantization_config block of §4.1 exactly as the real checkpoint has it
// (the generator writes it; the parser checks a file's block against it).
nlohmann::json k3_quantization_config();

}  // namespace deltafin
