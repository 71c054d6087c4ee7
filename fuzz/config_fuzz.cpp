// libFuzzer target: config.json of every model family, through the typed,
// validated parsers: Kimi K3 (model/kimi_k3/config.h), Qwen3-MoE
// (model/qwen3_moe/qwen3_moe_config.h), Qwen3 dense (model/qwen3/qwen3_config.h)
// and K3's DSpark drafter (model/k3_dspark/config.h, also checked against a
// small K3 target with validate_dspark_for_target).
//
// The input bytes are a config.json; text that is not JSON is skipped (each
// family's reader reports it before the parser sees it). Every parser gets
// every document: deltafin::Error is the one expected failure, with a message
// naming the file. An accepted config keeps its promises: the derived sizes
// its struct offers (K3's D_kda and MLA head width, Qwen3's q/kv widths and
// groups, Qwen3-MoE's expert record bytes, DSpark's context width) are
// computed without overflow (UBSan aborts on a signed one; unsigned ones are
// checked here), DSpark's YaRN table (make_dspark_yarn, from the config
// alone) is finite and built without UB, its layer tables have one entry per
// layer, and a Qwen3 or
// Qwen3-MoE config written back with its *_config_json function parses to
// the same config (parse(json(c)) == c, as their headers promise). Any other
// exception, crash or sanitizer report is a bug.
//
// Run with scripts/fuzz.sh; the seed corpus is fuzz/corpus/config/, the
// dictionary fuzz/config.dict.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/deepseek_v3/config.h"
#include "model/k3_dspark/config.h"
#include "model/k3_dspark/yarn.h"
#include "model/kimi_k3/config.h"
#include "model/qwen3/qwen3_config.h"
#include "model/qwen3_moe/qwen3_moe_config.h"
#include "util/error.h"

namespace {

using nlohmann::json;

const std::string kSource = "fuzz/config.json";

[[noreturn]] void bad(const std::string& what) {
  std::fprintf(stderr, "config parser breaks its contract: %s\n", what.c_str());
  std::abort();
}

// Runs one parser: an accepted config goes to `check`, an Error must name the file.
template <typename Parse, typename Check>
void run(const char* family, Parse parse, Check check) {
  std::optional<decltype(parse())> config;
  try {
    config.emplace(parse());
  } catch (const deltafin::Error& e) {
    if (std::string_view(e.what()).find(kSource) == std::string_view::npos)
      bad(std::string(family) + " error does not name the file: " + e.what());
    return;
  }
  check(*config);
}

// The K3 config `make-model --preset tiny` writes (the target of the DSpark
// seed), which DSpark configs are checked against.
const deltafin::K3Config& k3_target() {
  static const deltafin::K3Config c = deltafin::parse_k3_config(json::parse(R"({
    "model_type": "kimi_k3", "dtype": "bfloat16", "tie_word_embeddings": false,
    "bos_token_id": 512, "eos_token_id": 514, "pad_token_id": 767,
    "text_config": {
      "model_type": "kimi_linear", "dtype": "bfloat16", "mla_use_nope": true, "mla_use_output_gate": true,
      "first_k_dense_replace": 1, "moe_layer_freq": 1, "num_expert_group": 1, "topk_group": 1,
      "use_grouped_topk": true, "topk_method": "noaux_tc", "moe_router_activation_func": "sigmoid",
      "moe_renormalize": true, "routed_scaling_factor": 1.0, "latent_moe_use_norm": true, "hidden_act": "situ",
      "num_nextn_predict_layers": 0, "tie_word_embeddings": false,
      "quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
        "quantization_status": "compressed", "config_groups": {"group_0": {"targets": ["Linear"],
        "weights": {"num_bits": 4, "group_size": 32, "type": "float", "strategy": "group", "symmetric": true,
                    "dynamic": false, "observer": "minmax", "scale_dtype": "torch.uint8"}}}},
      "hidden_size": 64, "num_hidden_layers": 10, "attn_res_block_size": 4, "vocab_size": 768,
      "intermediate_size": 128, "num_experts": 16, "num_experts_per_token": 4, "routed_expert_hidden_size": 32,
      "moe_intermediate_size": 64, "num_shared_experts": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
      "q_lora_rank": 32, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
      "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0, "rms_norm_eps": 1e-5,
      "bos_token_id": 512, "eos_token_id": 514, "pad_token_id": 767, "max_position_embeddings": 1048576,
      "linear_attn_config": {"use_full_rank_gate": true, "num_heads": 2, "head_dim": 32,
        "short_conv_kernel_size": 4, "gate_lower_bound": -5.0, "full_attn_layers": [4, 8, 10],
        "kda_layers": [1, 2, 3, 5, 6, 7, 9]}}
  })"), "k3-target/config.json");
  return c;
}

void check_k3(const deltafin::K3Config& c) {
  if (static_cast<int64_t>(c.layer_kinds.size()) != c.num_hidden_layers) bad("K3 layer_kinds size");
  if (static_cast<int64_t>(c.full_attn_layers.size() + c.kda_layers.size()) != c.num_hidden_layers)
    bad("K3 layer lists do not cover the layers once");
  (void)c.kda_dim();
  (void)c.mla_qk_head_dim();
  if (c.pad_token_id != c.reserved_base() + 255) bad("K3 pad id");
}

void check_qwen3_shared(const deltafin::Qwen3Config& c, const char* family) {
  (void)c.q_dim();
  (void)c.kv_dim();
  if (c.groups() < 1 || c.groups() * c.num_key_value_heads != c.num_attention_heads)
    bad(std::string(family) + " grouped-query attention groups");
  if (c.head_dim < 2 || c.head_dim % 2) bad(std::string(family) + " head_dim");
}

void check_qwen3(const deltafin::Qwen3Config& c) {
  check_qwen3_shared(c, "Qwen3");
  const json written = deltafin::qwen3_config_json(c);
  deltafin::Qwen3Config back;
  try {
    back = deltafin::parse_qwen3_config(written, kSource);
  } catch (const deltafin::Error& e) {
    bad(std::string("Qwen3 config written back does not parse: ") + e.what() + "\n" + written.dump());
  }
  if (deltafin::qwen3_config_json(back) != written) bad("Qwen3 parse(json(c)) != c:\n" + written.dump());
}

void check_qwen3_moe(const deltafin::Qwen3MoeConfig& c) {
  check_qwen3_shared(c.base, "Qwen3-MoE");
  if (static_cast<int64_t>(c.moe_layer.size()) != c.base.num_hidden_layers) bad("Qwen3-MoE moe_layer size");
  if (c.moe_layers().empty()) bad("Qwen3-MoE without MoE layers");
  if (c.num_experts_per_tok > c.num_experts) bad("Qwen3-MoE k > experts");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(c.moe_intermediate_size), static_cast<uint64_t>(c.base.hidden_size),
                             &bytes) ||
      __builtin_mul_overflow(bytes, uint64_t{6}, &bytes))
    bad("Qwen3-MoE expert_record_bytes() overflows");
  if (c.expert_record_bytes() != bytes) bad("Qwen3-MoE expert_record_bytes()");
  const json written = deltafin::qwen3_moe_config_json(c);
  deltafin::Qwen3MoeConfig back;
  try {
    back = deltafin::parse_qwen3_moe_config(written, kSource);
  } catch (const deltafin::Error& e) {
    bad(std::string("Qwen3-MoE config written back does not parse: ") + e.what() + "\n" + written.dump());
  }
  if (deltafin::qwen3_moe_config_json(back) != written) bad("Qwen3-MoE parse(json(c)) != c:\n" + written.dump());
}

void check_dspark(const deltafin::DSparkConfig& c) {
  (void)c.qk_head_dim();
  (void)c.context_width();
  // The rotary table the drafter builds from the config alone: finite.
  const deltafin::DSparkYarn y = deltafin::make_dspark_yarn(c);
  if (static_cast<int64_t>(y.inv_freq.size()) != c.qk_rope_head_dim / 2) bad("DSpark YaRN table size");
  for (float f : y.inv_freq)
    if (!std::isfinite(f)) bad("DSpark YaRN inverse frequency is not finite");
  if (!std::isfinite(y.attention_scale) || !std::isfinite(y.cos_sin_scale)) bad("DSpark YaRN scales are not finite");
  if (static_cast<int64_t>(c.target_layer_ids.size()) != c.num_target_layers) bad("DSpark target layers");
  try {
    deltafin::validate_dspark_for_target(c, k3_target(), kSource);
  } catch (const deltafin::Error& e) {
    if (std::string_view(e.what()).find(kSource) == std::string_view::npos)
      bad(std::string("DSpark target check does not name the file: ") + e.what());
  }
}

// An accepted DeepSeek-V3-family config gives finite RoPE frequencies and
// softmax scale, and an expert record of positive size.
void check_deepseek_v3(const deltafin::DeepseekV3Config& c) {
  const deltafin::RopeFreqs r = deltafin::make_rope(c.qk_rope_head_dim, c.rope_theta, c.yarn);
  for (double f : r.inv_freq)
    if (!std::isfinite(f)) bad("DeepSeek-V3 RoPE inverse frequency is not finite");
  if (!std::isfinite(c.softmax_scale()) || !(c.softmax_scale() > 0)) bad("DeepSeek-V3 softmax scale");
  try {
    if (c.expert_record_bytes() == 0) bad("DeepSeek-V3 expert record of 0 bytes");
  } catch (const deltafin::Error&) {
    // an FP8 record whose values are not a multiple of 4 bytes is refused by name
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json root;
  try {
    root = json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const json::exception&) {
    return 0;  // not JSON: the readers say so before any parser runs
  }
  run("K3", [&] { return deltafin::parse_k3_config(root, kSource); }, check_k3);
  run("Qwen3-MoE", [&] { return deltafin::parse_qwen3_moe_config(root, kSource); }, check_qwen3_moe);
  run("Qwen3", [&] { return deltafin::parse_qwen3_config(root, kSource); }, check_qwen3);
  run("DSpark", [&] { return deltafin::parse_dspark_config(root, kSource); }, check_dspark);
  run("DeepSeek-V3", [&] { return deltafin::parse_deepseek_v3_config(root, kSource); }, check_deepseek_v3);
  return 0;
}
