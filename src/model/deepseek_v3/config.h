// config.json of a DeepSeek-V3-family checkpoint (Hugging Face
// `DeepseekV3ForCausalLM`): DeepSeek V3 / R1 / V3.1 (model_type
// "deepseek_v3") and Kimi K2 / K2-Thinking ("kimi_k2"), docs/deepseek-v3.md.
// Every dimension and option comes from the file (YaRN's betas included:
// Kimi K2 sets them to 1 / 1); what the forward pass does not implement is
// refused by field name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/common/rope.h"

namespace deltafin {

// How the released weights are stored (quantization_config).
enum class DsQuant {
  None,          // BF16 throughout
  Fp8Block,      // "fp8", e4m3 with a float32 weight_scale_inv per 128 x 128 block
  Int4Experts,   // "compressed-tensors" pack-quantized: routed experts INT4, group 32, BF16 scales
};

struct DeepseekV3Config {
  std::string model_type;  // "deepseek_v3" or "kimi_k2"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;      // the dense layers' MLP width
  int64_t moe_intermediate_size = 0;  // each routed (and shared) expert's width
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t q_lora_rank = 0;            // 0: no query compression (plain q_proj)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int64_t n_routed_experts = 0, num_experts_per_tok = 0, n_shared_experts = 0;
  int64_t n_group = 1, topk_group = 1;
  int64_t first_k_dense_replace = 0;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 0;
  double rope_theta = 0;
  YarnScaling yarn;
  int64_t num_nextn_predict_layers = 0;  // the MTP layer(s) the checkpoint carries
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  DsQuant quant = DsQuant::None;
  std::vector<std::string> unused_fields;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe_layer(int64_t l) const { return l >= first_k_dense_replace; }
  std::vector<int64_t> moe_layers() const;
  // (float)((nope + rope)^-0.5 · mscale(factor, mscale_all_dim)^2), as
  // DeepseekV3Attention computes its scaling in double.
  float softmax_scale() const;
  // One routed expert's record: gate_proj, up_proj, down_proj as released
  // (with their scales), deepseek_v3/weights.h says where each part sits.
  uint64_t expert_record_bytes() const;
};

DeepseekV3Config parse_deepseek_v3_config(const nlohmann::json& root, const std::string& source);
DeepseekV3Config read_deepseek_v3_config(const std::string& path);

const char* ds_quant_name(DsQuant q);

}  // namespace deltafin
