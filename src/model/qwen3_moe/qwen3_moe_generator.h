// Small random Qwen3-MoE checkpoints in exactly the Hugging Face layout
// (`make-model --arch qwen3_moe`): config.json with every field of the
// released configs, model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight
// and the router mlp.gate.weight in BF16, sharded safetensors with the index,
// tokenizer.json and tokenizer_config.json (model/qwen3/qwen3_generator.h
// writes them, as for the dense model). Seeded BF16 weights scaled so
// activations stay of order 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/common/make_checkpoint.h"
#include "model/qwen3/qwen3_scripted.h"
#include "model/qwen3_moe/qwen3_moe_config.h"

namespace deltafin {

struct Qwen3MoeDims {
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int64_t intermediate = 0;      // dense layers' MLP (mlp_only_layers / decoder_sparse_step)
  int64_t moe_intermediate = 0;  // each expert's MLP
  int64_t experts = 0, top_k = 0;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  bool norm_topk_prob = true;  // as every released Qwen3-MoE config
};

// "tiny" (tests), "small" (a few hundred MB) or "bench": Qwen3-235B-A22B's
// real expert (hidden 4096, moe_intermediate 1536: 3 x 4096 x 1536 BF16 =
// 37.7 MB per record), its attention shape (64 heads, 4 KV heads, head_dim
// 128) and top-8, with 4 layers of 32 experts. Vocabularies stay at most 800
// ids: the built-in training text supports about 550 BPE merges.
Qwen3MoeDims qwen3_moe_preset(const std::string& name);

struct Qwen3MoeGenerateOptions {
  std::string out_dir;
  uint64_t seed = 1;
  Qwen3MoeDims dims = qwen3_moe_preset("tiny");
  int64_t max_position_embeddings = 40960;  // the released configs' value
  double rope_theta = 1000000.0, rms_norm_eps = 1e-6;
  double yarn_factor = 0;  // > 0: rope_scaling {rope_type yarn, factor, original_max_position_embeddings}
  int64_t yarn_original_max_positions = 0;
  bool tie_word_embeddings = false;  // the released MoE checkpoints are untied
  int shards = 2;                    // 1: model.safetensors; N > 1: shards + index
  bool force = false;
  // Set: greedy output follows this script (model/qwen3/qwen3_scripted.h).
  std::optional<ScriptedOutput> script;
  // A routing profile (model/common/routing_profile.h); empty or "uniform": none.
  std::string routing_profile;
};

struct Qwen3MoeGenerateResult {
  Qwen3MoeConfig config;  // as the runtime parses the config.json written
  uint64_t payload_bytes = 0;
  size_t tensors = 0;
};

Qwen3MoeGenerateResult generate_qwen3_moe_checkpoint(const Qwen3MoeGenerateOptions& options);

// `deltafin make-model --arch qwen3_moe`: the preset (tiny, small, bench)
// with --hidden, --layers, --experts, --top-k, --vocab, --moe-intermediate
// and --intermediate (dense layers) applied; returns the lines to print.
std::string make_qwen3_moe_checkpoint(const MakeCheckpointRequest& request);

}  // namespace deltafin
