// Small random checkpoints of the DeepSeek-V3 family (DeepseekV3ForCausalLM:
// DeepSeek V3 / R1 / V3.1, Kimi K2 / K2-Thinking) in exactly the released
// Hugging Face layout (`make-model --arch deepseek_v3`):
// config.json with every field of the released configs and their
// quantization_config, sharded safetensors (model-00001-of-000002, ...) with
// model.safetensors.index.json, the real tensor names and dtypes.
//
// Weights as released: every Linear of attention, dense MLP, shared and
// routed experts is F8_E4M3 with an F32 `weight_scale_inv` per 128 x 128
// block (partial blocks at the edges), except in the K2-Thinking flavour,
// where only the routed experts are quantized, as compressed-tensors
// pack-quantized INT4 (I32 weight_packed, BF16 weight_scale per group of 32,
// I64 weight_shape) and everything else is BF16. Norms, embeddings, lm_head
// and the router are BF16, e_score_correction_bias F32 (random, so routing
// depends on it). The MTP layer (model.layers.{L}.*) is written when the
// flavour has num_nextn_predict_layers = 1.
//
// Values are seeded random, drawn so the decoded weights have standard
// deviation about 1/sqrt(fan-in): FP8 codes from a Gaussian of std 64 (no
// NaN code is ever written) times block scales around the wanted std over
// 64, INT4 codes round(N(0, 2.5)) clamped to [-8, 7] times BF16 group scales.
// Tensors are generated and written in bounded chunks, each file atomically
// (temporary name, fsync, rename); config.json last, so a directory with a
// config.json holds a complete checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/safetensors_writer.h"

namespace deltafin {

// Which release the checkpoint imitates (--flavor): the weights' layout and
// config.json, and the tokenizer files and chat template
// (model/deepseek_v3/tokenizer_files.h) of that release.
enum class DeepseekV3Flavor {
  DeepseekV3,       // DeepSeek V3: FP8, grouped routing (n_group > 1), q_lora, YaRN beta 32/1, the MTP layer
  DeepseekR1,       // the same, with R1's tokenizer and template (thinking)
  DeepseekV31,      // the same, quantization_config's scale_fmt "ue8m0" (power-of-two block scales), V3.1's template
  DeepseekV3QProj,  // DeepSeek V3 with q_lora_rank null: a plain q_proj per layer
  KimiK2,           // Kimi K2-Instruct: FP8, n_group 1, YaRN beta 1/1, rope_theta 50000, no MTP
  KimiK2Thinking,   // Kimi K2-Thinking: INT4 routed experts (compressed-tensors), the rest BF16
};

// "deepseek_v3", "deepseek_r1", "deepseek_v31", "deepseek_v3_q_proj", "kimi_k2", "kimi_k2_thinking".
DeepseekV3Flavor parse_deepseek_v3_flavor(const std::string& name);
const char* deepseek_v3_flavor_name(DeepseekV3Flavor flavor);
bool is_kimi_flavor(DeepseekV3Flavor flavor);

struct DeepseekV3Dims {
  int64_t hidden = 0, layers = 0, dense_layers = 0;  // dense_layers: first_k_dense_replace
  int64_t heads = 0, q_lora = 0;                     // q_lora 0: q_lora_rank null (plain q_proj)
  int64_t kv_lora = 0, nope = 0, rope = 0, v_dim = 0;
  int64_t intermediate = 0, moe_intermediate = 0;    // dense MLP; each routed and shared expert
  int64_t experts = 0, top_k = 0, shared = 1, n_group = 1, topk_group = 1;
  int64_t vocab = 0;
  int64_t mtp = 0;                                    // num_nextn_predict_layers (0 or 1)
};

// The preset's dimensions for the flavour: "tiny" (unit tests: hidden 160
// and dense intermediate 200, so FP8 tensors have full and partial 128-blocks;
// 4 layers, 1 dense), "small" (hidden 576, 32 experts: under 90 MB) or "bench" (DeepSeek V3's real
// expert, hidden 7168 x moe_intermediate 2048: 44,050,944 bytes FP8 with
// scales; K2-Thinking's INT4 expert: 24,772,656 bytes; 4 layers of 16 experts
// and a small attention, so it fits a small disk).
DeepseekV3Dims deepseek_v3_preset(const std::string& preset, DeepseekV3Flavor flavor);

// The released config's fields that are not dimensions (rope, routing,
// quantization), for the flavour.
struct DeepseekV3Release {
  std::string model_type;         // "deepseek_v3" or "kimi_k2"
  double rope_theta = 10000, yarn_factor = 40, beta_fast = 32, beta_slow = 1, mscale = 1, mscale_all_dim = 1;
  int64_t original_max_positions = 4096, max_positions = 163840;
  double routed_scaling_factor = 2.5, rms_norm_eps = 1e-6;
  bool int4_experts = false;      // compressed-tensors INT4 routed experts, the rest BF16; else FP8 everywhere
  bool ue8m0_scales = false;      // V3.1: FP8 block scales are powers of two (scale_fmt "ue8m0"), still F32
};
DeepseekV3Release deepseek_v3_release(DeepseekV3Flavor flavor);

// config.json for these dimensions, with every field of the released config
// (bos_token_id and eos_token_id where the flavour's tokenizer files put them).
nlohmann::json deepseek_v3_config_json(DeepseekV3Flavor flavor, const DeepseekV3Dims& dims);
// The released quantization_config of the flavour's format.
nlohmann::json deepseek_v3_quantization_config(DeepseekV3Flavor flavor);

// Every tensor of the checkpoint, in the order written (layer by layer, the
// MTP layer last). Exposed for tests and for the bench sizes.
std::vector<TensorSpec> deepseek_v3_tensor_specs(DeepseekV3Flavor flavor, const DeepseekV3Dims& dims);
// Bytes of one routed expert as stored: its three matrices with their scales
// (FP8: weight + weight_scale_inv; INT4: weight_packed + weight_scale + weight_shape).
uint64_t deepseek_v3_expert_bytes(DeepseekV3Flavor flavor, const DeepseekV3Dims& dims);

struct DeepseekV3GenerateOptions {
  std::string out_dir;
  uint64_t seed = 1;
  DeepseekV3Flavor flavor = DeepseekV3Flavor::DeepseekV3;
  DeepseekV3Dims dims;
  uint64_t shard_bytes = 4ull << 30;  // target size per shard (at least two shards)
  bool force = false;                 // overwrite an existing checkpoint in out_dir
  bool progress = true;
};

struct DeepseekV3GenerateResult {
  nlohmann::json config;  // the config.json written
  uint64_t payload_bytes = 0;
  int shards = 0;
  size_t tensors = 0;
  double seconds = 0;
};

DeepseekV3GenerateResult generate_deepseek_v3_checkpoint(const DeepseekV3GenerateOptions& options);

// The encoders the generator writes with (exposed for tests; the float64
// reference in tests/deepseek_v3 decodes with its own code).
// float8_e4m3fn (bias 7, no infinities, 0x7F/0xFF NaN) nearest to x, ties to
// even, saturating at +-448: never a NaN code. x must not be NaN.
uint8_t e4m3_from_double(double x);
// compressed-tensors pack_to_int32 for 4 bits along a row: value q in
// [-8, 7] of column 8j + k is stored as the nibble q + 8 at bits 4k..4k+3 of
// word j; a partial last word is padded with zero nibbles.
std::vector<int32_t> pack_int4_row(const std::vector<int>& q);

}  // namespace deltafin
