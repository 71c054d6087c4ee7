#include "model/kimi_k3/generator.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "format/checkpoint_dir.h"
#include "format/checkpoint.h"
#include "model/common/routing_profile.h"
#include "model/kimi_k3/config.h"
#include "model/kimi_k3/tensors.h"
#include "format/safetensors_writer.h"
#include "model/kimi_k3/tokenizer_files.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"
#include "util/progress.h"
#include "util/rng.h"

namespace deltafin {

namespace fs = std::filesystem;
using nlohmann::json;

json k3_config_json(const K3Dims& d) {
  const int64_t base = d.vocab - 256;
  std::vector<int64_t> kda;
  for (int64_t l = 1; l <= d.layers; ++l)
    if (std::find(d.full_attn_layers.begin(), d.full_attn_layers.end(), l) == d.full_attn_layers.end()) kda.push_back(l);
  json text = {
      {"model_type", "kimi_linear"},
      {"architectures", {"KimiLinearForCausalLM"}},
      {"dtype", "bfloat16"},
      {"hidden_size", d.hidden},
      {"num_hidden_layers", d.layers},
      {"attn_res_block_size", d.block},
      {"vocab_size", d.vocab},
      {"intermediate_size", d.intermediate},
      {"num_experts", d.experts},
      {"num_experts_per_token", d.top_k},
      {"routed_expert_hidden_size", d.latent},
      {"moe_intermediate_size", d.moe_intermediate},
      {"num_shared_experts", d.shared},
      {"num_attention_heads", d.mla_heads},
      {"num_key_value_heads", d.mla_heads},
      {"q_lora_rank", d.q_lora},
      {"kv_lora_rank", d.kv_lora},
      {"qk_nope_head_dim", d.nope},
      {"qk_rope_head_dim", d.rope},
      {"v_head_dim", d.v_dim},
      {"activation_situ_beta", 4.0},
      {"activation_situ_linear_beta", 25.0},
      {"rms_norm_eps", 1e-5},
      {"bos_token_id", base},
      {"eos_token_id", base + 2},
      {"pad_token_id", base + 255},
      {"max_position_embeddings", 1048576},
      {"use_cache", true},
      {"mla_use_nope", true},
      {"mla_use_output_gate", true},
      {"first_k_dense_replace", 1},
      {"moe_layer_freq", 1},
      {"num_expert_group", 1},
      {"topk_group", 1},
      {"use_grouped_topk", true},
      {"topk_method", "noaux_tc"},
      {"moe_router_activation_func", "sigmoid"},
      {"moe_renormalize", true},
      {"routed_scaling_factor", 1.0},
      {"latent_moe_use_norm", true},
      {"hidden_act", "situ"},
      {"num_nextn_predict_layers", 0},
      {"tie_word_embeddings", false},
      {"linear_attn_config",
       {{"num_heads", d.kda_heads},
        {"head_dim", d.kda_head_dim},
        {"short_conv_kernel_size", d.conv_kernel},
        {"gate_lower_bound", -5.0},
        {"use_full_rank_gate", true},
        {"full_attn_layers", d.full_attn_layers},
        {"kda_layers", kda}}},
      {"quantization_config", k3_quantization_config()},
  };
  return json{{"architectures", {"KimiK3ForConditionalGeneration"}},
              {"model_type", "kimi_k3"},
              {"dtype", "bfloat16"},
              {"tie_word_embeddings", false},
              {"bos_token_id", base},
              {"eos_token_id", base + 2},
              {"pad_token_id", base + 255},
              {"text_config", text},
              {"vision_config", {{"model_type", "kimi_k3_vision"}, {"hidden_size", 32}, {"note", "generated; never run"}}}};
}

namespace {

// How one tensor's random values are drawn, chosen from its name: this is
// where "activations stay of order 1" is decided.
enum class Init { Normal, Ones, LogUniform1to16, Uniform, MxfpPacked, MxfpScale, Zero };

struct InitRule {
  Init kind;
  double scale;  // std for Normal, half-width for Uniform, noise for Ones
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

InitRule init_rule(const TensorSpec& t) {
  const std::string& n = t.name;
  const double in = t.shape.size() >= 2 ? static_cast<double>(t.shape[1]) : 1.0;
  if (ends_with(n, ".weight_packed")) return {Init::MxfpPacked, 0};
  if (ends_with(n, ".weight_scale")) return {Init::MxfpScale, 0};
  if (contains(n, "embed_tokens")) return {Init::Normal, 1.0};
  if (ends_with(n, "A_log")) return {Init::LogUniform1to16, 0};
  if (ends_with(n, "dt_bias")) return {Init::Normal, 0.5};
  if (contains(n, "conv1d")) return {Init::Uniform, 0.5};
  if (contains(n, "e_score_correction_bias")) return {Init::Normal, 0.05};
  // Pseudo-queries: scores dot(rms-normalised key, s) of order 1.
  if (contains(n, "res_proj")) return {Init::Normal, 1.0 / std::sqrt(static_cast<double>(t.shape.back()))};
  if (contains(n, "norm")) return {Init::Ones, 0.1};
  if (contains(n, "vision_tower") || contains(n, "mm_projector")) return {Init::Normal, 0.02};
  // Every projection: std 1/sqrt(fan-in) keeps output scale equal to input scale.
  return {Init::Normal, 1.0 / std::sqrt(in)};
}

// e8m0 scale so that uniformly random e2m1 codes (RMS 2.93) give weights of
// standard deviation about 1/sqrt(fan-in), like a trained matrix.
uint8_t mxfp_base_scale(uint64_t fan_in) {
  double target = 1.0 / (2.926 * std::sqrt(static_cast<double>(fan_in)));
  return static_cast<uint8_t>(127 + std::lround(std::log2(target)));
}

void store_element(DType t, double v, uint8_t* dst) {
  if (t == DType::BF16) {
    uint16_t b = f32_to_bf16(static_cast<float>(v));
    dst[0] = static_cast<uint8_t>(b), dst[1] = static_cast<uint8_t>(b >> 8);
  } else if (t == DType::F32) {
    uint32_t u = f32_bits(static_cast<float>(v));
    for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(u >> (8 * i));
  } else {
    fail("generator: no float init for dtype ", dtype_name(t));
  }
}

// Per-row factors a routing profile applies to this tensor (empty: none).
std::vector<double> profile_factors(const RoutingShaper* shaper, const TensorSpec& t) {
  if (!shaper) return {};
  return shaper->row_factors(t.name, t.shape.empty() ? 1 : t.shape[0]);
}

// Streams one tensor's payload into the writer in chunks of at most 4 MiB.
// `shaper` (a routing profile) scales rows after the values are drawn, so
// the random stream, and every tensor it does not name, stay as without it.
void write_tensor(SafetensorsWriter& w, const TensorSpec& t, uint64_t seed, const RoutingShaper* shaper,
                  Progress& progress) {
  Rng rng(seed ^ fnv1a64(t.name));
  const InitRule rule = init_rule(t);
  const std::vector<double> factors = profile_factors(shaper, t);
  if (!factors.empty() && (rule.kind == Init::MxfpPacked || rule.kind == Init::MxfpScale))
    fail("routing profile: cannot scale the packed tensor ", t.name);
  const size_t esize = dtype_size(t.dtype);
  const uint64_t row_elems = t.shape.empty() ? 1 : t.bytes() / esize / t.shape[0];
  const uint64_t total = t.bytes();
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(total, 4u << 20)));
  uint8_t base_scale = 0;
  if (rule.kind == Init::MxfpScale) base_scale = mxfp_base_scale(t.shape[1] * 32);
  uint64_t done = 0;
  while (done < total) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), total - done));
    if (rule.kind == Init::MxfpPacked) {
      for (size_t i = 0; i < n; i += 8) {
        uint64_t r = rng.next();
        for (size_t j = 0; j < 8 && i + j < n; ++j) buf[i + j] = static_cast<uint8_t>(r >> (8 * j));
      }
    } else if (rule.kind == Init::MxfpScale) {
      for (size_t i = 0; i < n; ++i) buf[i] = static_cast<uint8_t>(base_scale - 1 + rng.below(3));
    } else {
      for (size_t i = 0; i < n; i += esize) {
        double v = 0;
        switch (rule.kind) {
          case Init::Normal: v = rule.scale * rng.normal(); break;
          case Init::Ones: v = 1.0 + rule.scale * rng.normal(); break;
          case Init::Uniform: v = rule.scale * (2.0 * rng.uniform() - 1.0); break;
          case Init::LogUniform1to16: v = std::log(1.0 + 15.0 * rng.uniform()); break;
          default: v = 0; break;
        }
        if (!factors.empty()) {
          const double f = factors[static_cast<size_t>((done + i) / esize / row_elems)];
          v = f == 0 ? 0.0 : f * v;  // a zeroed row is +0, not -0
        }
        store_element(t.dtype, v, buf.data() + i);
      }
    }
    w.append(buf.data(), n);
    progress.add(n);
    done += n;
  }
}

// Consecutive runs of tensors, each run one shard; at least two shards.
std::vector<std::vector<TensorSpec>> plan_shards(const std::vector<TensorSpec>& tensors, uint64_t shard_bytes) {
  uint64_t total = 0;
  for (const TensorSpec& t : tensors) total += t.bytes();
  const uint64_t target = std::max<uint64_t>(1, std::min(shard_bytes, (total + 1) / 2));
  std::vector<std::vector<TensorSpec>> shards(1);
  uint64_t current = 0;
  for (const TensorSpec& t : tensors) {
    if (!shards.back().empty() && current + t.bytes() > target) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += t.bytes();
  }
  if (shards.size() < 2) {  // one huge tensor or a single tensor: split the list itself
    std::vector<TensorSpec> all = shards[0];
    shards.assign(2, {});
    for (size_t i = 0; i < all.size(); ++i) shards[i < (all.size() + 1) / 2 ? 0 : 1].push_back(all[i]);
  }
  return shards;
}

}  // namespace

GenerateResult generate_k3_checkpoint(const GenerateOptions& o) {
  json config_json = k3_config_json(o.dims);
  std::optional<RoutingShaper> shaper;
  if (!o.routing_profile.empty() && o.routing_profile != "uniform") {
    std::vector<int64_t> moe, kda;
    for (int64_t l = 1; l < o.dims.layers; ++l) moe.push_back(l);  // layer 0 is dense (first_k_dense_replace 1)
    const std::vector<int64_t>& full = o.dims.full_attn_layers;  // counts from 1
    for (int64_t l = 0; l < o.dims.layers; ++l)
      if (std::find(full.begin(), full.end(), l + 1) == full.end()) kda.push_back(l);
    const RoutingProfile& p = routing_profile(o.routing_profile);
    shaper.emplace(p, p.k3, o.dims.experts, o.dims.top_k, o.seed, "block_sparse_moe.gate.weight",
                   "block_sparse_moe.gate.e_score_correction_bias",
                   std::vector<std::string>{"self_attn.q_b_proj.weight", "self_attn.g_proj.weight"}, kda);
    config_json[kRoutingProfileKey] = shaper->record(moe);
  }
  // Parse our own config through the real loader first: the generator can
  // never write a checkpoint the runtime would refuse.
  const K3Config config = parse_k3_config(config_json, "generated config.json");
  prepare_checkpoint_dir(o.out_dir, o.force);

  std::vector<TensorSpec> tensors = k3_language_tensors(config, config.kda_head_dim);
  tensors.push_back({"vision_tower.patch_embed.proj.weight", DType::BF16, {32, 3, 2, 2}});
  tensors.push_back({"mm_projector.proj.0.weight", DType::BF16, {static_cast<uint64_t>(config.hidden_size), 32}});

  std::vector<std::vector<TensorSpec>> shards = plan_shards(tensors, o.shard_bytes);
  uint64_t total = 0;
  for (const TensorSpec& t : tensors) total += t.bytes();

  GenerateResult result;
  Progress progress("make-model", total, o.progress);
  json weight_map = json::object();
  const int n = static_cast<int>(shards.size());
  for (int s = 0; s < n; ++s) {
    const std::string name = shard_file_name(s + 1, n);
    SafetensorsWriter w((fs::path(o.out_dir) / name).string(), shards[s], {{"format", "pt"}});
    for (const TensorSpec& t : shards[s]) {
      write_tensor(w, t, o.seed, shaper ? &*shaper : nullptr, progress);
      weight_map[t.name] = name;
    }
    w.commit();
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic((fs::path(o.out_dir) / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  write_k3_tokenizer_files(o.out_dir, config.reserved_base());
  // config.json last: its presence marks a complete checkpoint.
  write_file_atomic((fs::path(o.out_dir) / "config.json").string(), config_json.dump(2) + "\n");
  progress.finish();

  result.config = config;
  result.payload_bytes = total;
  result.shards = n;
  result.tensors = tensors.size();
  result.seconds = progress.seconds();
  return result;
}

}  // namespace deltafin
