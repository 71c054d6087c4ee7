// config.json of a Qwen3-MoE checkpoint (Hugging Face `Qwen3MoeForCausalLM`,
// model_type "qwen3_moe": Qwen3-30B-A3B, Qwen3-235B-A22B and their successors
// in that layout) -> typed configuration. The attention half is Qwen3's
// (model/qwen3/qwen3_config.h, parsed by the same code); the MLP half of
// layer l is a sparse MoE block when l is not in mlp_only_layers and
// (l + 1) % decoder_sparse_step == 0, else a dense SwiGLU MLP of
// intermediate_size, exactly as transformers' Qwen3MoeDecoderLayer decides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/qwen3/qwen3_config.h"

namespace deltafin {

struct Qwen3MoeConfig {
  // Everything Qwen3 dense has: dimensions, attention, RoPE (YaRN included),
  // norms, vocabulary, tied embeddings, token ids. base.intermediate_size is
  // the dense layers' MLP width (used only by mlp_only / non-sparse layers).
  Qwen3Config base;
  int64_t moe_intermediate_size = 0;  // each expert's MLP width
  int64_t num_experts = 0;            // E per MoE layer
  int64_t num_experts_per_tok = 0;    // k routed per token
  int64_t decoder_sparse_step = 1;
  bool norm_topk_prob = false;        // transformers' default when absent
  std::vector<int64_t> mlp_only_layers;
  std::vector<bool> moe_layer;        // derived, per layer
  std::vector<std::string> unused_fields;

  bool is_moe_layer(int64_t l) const { return moe_layer[static_cast<size_t>(l)]; }
  std::vector<int64_t> moe_layers() const;
  // One expert record: gate_proj, up_proj, down_proj as stored (BF16).
  uint64_t expert_tensor_bytes() const { return static_cast<uint64_t>(moe_intermediate_size) * base.hidden_size * 2; }
  uint64_t expert_record_bytes() const { return 3 * expert_tensor_bytes(); }
};

Qwen3MoeConfig parse_qwen3_moe_config(const nlohmann::json& root, const std::string& source);
Qwen3MoeConfig read_qwen3_moe_config(const std::string& path);
// The config.json such a checkpoint carries; parse(json(c)) == c.
nlohmann::json qwen3_moe_config_json(const Qwen3MoeConfig& c);

}  // namespace deltafin
