#include "model/deepseek_v3/generator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>

#include "format/checkpoint.h"
#include "format/checkpoint_dir.h"
#include "model/deepseek_v3/config.h"
#include "model/deepseek_v3/tokenizer_files.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"
#include "util/progress.h"
#include "util/rng.h"

namespace deltafin {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kFp8Block = 128;     // weight_block_size [128, 128] of the FP8 releases
constexpr int64_t kInt4Group = 32;     // K2-Thinking's group_size
constexpr double kFp8CodeStd = 64.0;   // std of the Gaussian the FP8 codes are drawn from (max code 448)
constexpr double kInt4CodeStd = 2.5;   // std of the Gaussian the INT4 codes are rounded from

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

}  // namespace

// ---- flavours, presets, releases ------------------------------------------

namespace {
constexpr DeepseekV3Flavor kFlavors[] = {DeepseekV3Flavor::DeepseekV3,     DeepseekV3Flavor::DeepseekR1,
                                             DeepseekV3Flavor::DeepseekV31,    DeepseekV3Flavor::DeepseekV3QProj,
                                             DeepseekV3Flavor::KimiK2,         DeepseekV3Flavor::KimiK2Thinking};
}  // namespace

DeepseekV3Flavor parse_deepseek_v3_flavor(const std::string& name) {
  if (name.empty()) return DeepseekV3Flavor::DeepseekV3;
  std::string names;
  for (DeepseekV3Flavor f : kFlavors) {
    if (name == deepseek_v3_flavor_name(f)) return f;
    names += cat(names.empty() ? "" : ", ", deepseek_v3_flavor_name(f));
  }
  fail("make-model --arch deepseek_v3: unknown --flavor \"", name, "\" (", names, ")");
}

const char* deepseek_v3_flavor_name(DeepseekV3Flavor f) {
  switch (f) {
    case DeepseekV3Flavor::DeepseekV3: return "deepseek_v3";
    case DeepseekV3Flavor::DeepseekR1: return "deepseek_r1";
    case DeepseekV3Flavor::DeepseekV31: return "deepseek_v31";
    case DeepseekV3Flavor::DeepseekV3QProj: return "deepseek_v3_q_proj";
    case DeepseekV3Flavor::KimiK2: return "kimi_k2";
    case DeepseekV3Flavor::KimiK2Thinking: return "kimi_k2_thinking";
  }
  return "?";
}

bool is_kimi_flavor(DeepseekV3Flavor f) {
  return f == DeepseekV3Flavor::KimiK2 || f == DeepseekV3Flavor::KimiK2Thinking;
}

DeepseekV3Dims deepseek_v3_preset(const std::string& preset, DeepseekV3Flavor flavor) {
  DeepseekV3Dims d;
  const bool kimi = is_kimi_flavor(flavor);
  if (preset == "tiny") {
    // hidden 160 and intermediate 200: FP8 matrices with a full and a partial
    // 128-block along a dimension; every other dimension is one partial block.
    d.hidden = 160, d.layers = 4, d.dense_layers = 1;
    d.heads = 4, d.q_lora = 96, d.kv_lora = 64, d.nope = 16, d.rope = 8, d.v_dim = 16;
    d.intermediate = 200, d.moe_intermediate = 96, d.experts = 16, d.top_k = 4;
    d.n_group = kimi ? 1 : 4, d.topk_group = kimi ? 1 : 2;
    d.vocab = 640;
  } else if (preset == "small") {
    d.hidden = 576, d.layers = 6, d.dense_layers = kimi ? 1 : 2;
    d.heads = 8, d.q_lora = 192, d.kv_lora = 128, d.nope = 32, d.rope = 16, d.v_dim = 32;
    d.intermediate = 1536, d.moe_intermediate = 256, d.experts = 32, d.top_k = 8;
    d.n_group = kimi ? 1 : 8, d.topk_group = kimi ? 1 : 4;
    d.vocab = kimi ? 1024 : 800;
  } else if (preset == "bench") {
    // The real expert (hidden 7168, moe_intermediate 2048) and head dims
    // around few heads, layers and experts.
    d.hidden = 7168, d.layers = 4, d.dense_layers = 1;
    d.heads = 8, d.q_lora = 1536, d.kv_lora = 512, d.nope = 128, d.rope = 64, d.v_dim = 128;
    d.intermediate = 2048, d.moe_intermediate = 2048, d.experts = 16, d.top_k = 8;
    d.n_group = kimi ? 1 : 4, d.topk_group = kimi ? 1 : 2;
    d.vocab = kimi ? 1024 : 800;
  } else {
    fail("make-model --arch deepseek_v3: --preset is tiny, small or bench, not \"", preset, "\"");
  }
  if (flavor == DeepseekV3Flavor::DeepseekV3QProj) d.q_lora = 0;
  d.mtp = kimi ? 0 : 1;  // the DeepSeek releases carry one MTP layer, Kimi's none
  return d;
}

DeepseekV3Release deepseek_v3_release(DeepseekV3Flavor flavor) {
  DeepseekV3Release r;  // DeepSeek V3 / R1's config.json
  if (is_kimi_flavor(flavor)) {
    r.model_type = "kimi_k2";
    r.rope_theta = 50000, r.beta_fast = 1, r.beta_slow = 1;
    r.routed_scaling_factor = 2.827;
    if (flavor == DeepseekV3Flavor::KimiK2Thinking) {
      r.yarn_factor = 64, r.max_positions = 262144;  // K2-Thinking (and K2-Instruct-0905): 256K context
      r.int4_experts = true;
    } else {
      r.yarn_factor = 32, r.max_positions = 131072;  // Kimi-K2-Instruct
    }
  } else {
    r.model_type = "deepseek_v3";
    r.ue8m0_scales = flavor == DeepseekV3Flavor::DeepseekV31;
  }
  return r;
}

json deepseek_v3_quantization_config(DeepseekV3Flavor flavor) {
  const DeepseekV3Release r = deepseek_v3_release(flavor);
  if (!r.int4_experts) {
    json q = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
              {"weight_block_size", {kFp8Block, kFp8Block}}};
    if (r.ue8m0_scales) q["scale_fmt"] = "ue8m0";  // DeepSeek V3.1 and later
    return q;
  }
  const json weights = {{"actorder", nullptr},    {"block_structure", nullptr}, {"dynamic", false},
                        {"group_size", kInt4Group}, {"num_bits", 4},          {"observer", "minmax"},
                        {"observer_kwargs", json::object()}, {"strategy", "group"}, {"symmetric", true},
                        {"type", "int"}};
  return json{{"config_groups",
               {{"group_0",
                 {{"input_activations", nullptr}, {"output_activations", nullptr}, {"targets", {"Linear"}},
                  {"weights", weights}}}}},
              {"format", "pack-quantized"},
              {"ignore", {"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"}},
              {"kv_cache_scheme", nullptr},
              {"quant_method", "compressed-tensors"},
              {"quantization_status", "compressed"}};
}

json deepseek_v3_config_json(DeepseekV3Flavor flavor, const DeepseekV3Dims& d) {
  const DeepseekV3Release r = deepseek_v3_release(flavor);
  const bool kimi = is_kimi_flavor(flavor);
  // Where the tokenizer files put them: DeepSeek's <｜begin▁of▁sentence｜> and
  // <｜end▁of▁sentence｜> are ids 0 and 1; Kimi's [BOS] and [EOS] open the
  // reserved ids after the ranks (K2's config: 163584, 163585).
  const int64_t bos = kimi ? d.vocab - 256 : 0, eos = kimi ? d.vocab - 255 : 1;
  // DeepSeek's config writes the YaRN numbers as integers, Kimi's as floats.
  const json rope_scaling =
      kimi ? json{{"beta_fast", r.beta_fast}, {"beta_slow", r.beta_slow}, {"factor", r.yarn_factor},
                  {"mscale", r.mscale}, {"mscale_all_dim", r.mscale_all_dim},
                  {"original_max_position_embeddings", r.original_max_positions}, {"type", "yarn"}}
           : json{{"beta_fast", std::lround(r.beta_fast)}, {"beta_slow", std::lround(r.beta_slow)},
                  {"factor", std::lround(r.yarn_factor)}, {"mscale", r.mscale}, {"mscale_all_dim", r.mscale_all_dim},
                  {"original_max_position_embeddings", r.original_max_positions}, {"type", "yarn"}};
  json c = {
      {"architectures", {"DeepseekV3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"auto_map",
       {{"AutoConfig", "configuration_deepseek.DeepseekV3Config"},
        {"AutoModel", "modeling_deepseek.DeepseekV3Model"},
        {"AutoModelForCausalLM", "modeling_deepseek.DeepseekV3ForCausalLM"}}},
      {"aux_loss_alpha", 0.001},
      {"bos_token_id", bos},
      {"eos_token_id", eos},
      {"first_k_dense_replace", d.dense_layers},
      {"hidden_act", "silu"},
      {"hidden_size", d.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", d.intermediate},
      {"kv_lora_rank", d.kv_lora},
      {"max_position_embeddings", r.max_positions},
      {"model_type", r.model_type},
      {"moe_intermediate_size", d.moe_intermediate},
      {"moe_layer_freq", 1},
      {"n_group", d.n_group},
      {"n_routed_experts", d.experts},
      {"n_shared_experts", d.shared},
      {"norm_topk_prob", true},
      {"num_attention_heads", d.heads},
      {"num_experts_per_tok", d.top_k},
      {"num_hidden_layers", d.layers},
      {"num_key_value_heads", d.heads},
      {"num_nextn_predict_layers", d.mtp},
      {"q_lora_rank", d.q_lora > 0 ? json(d.q_lora) : json(nullptr)},
      {"qk_nope_head_dim", d.nope},
      {"qk_rope_head_dim", d.rope},
      {"quantization_config", deepseek_v3_quantization_config(flavor)},
      {"rms_norm_eps", r.rms_norm_eps},
      {"rope_scaling", rope_scaling},
      {"rope_theta", kimi ? json(r.rope_theta) : json(std::lround(r.rope_theta))},
      {"routed_scaling_factor", r.routed_scaling_factor},
      {"scoring_func", "sigmoid"},
      {"seq_aux", true},
      {"tie_word_embeddings", false},
      {"topk_group", d.topk_group},
      {"topk_method", "noaux_tc"},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"v_head_dim", d.v_dim},
      {"vocab_size", d.vocab},
  };
  if (kimi) {
    c["pretraining_tp"] = 1;
    c["transformers_version"] = "4.48.3";
  } else {
    c["ep_size"] = 1;
    c["transformers_version"] = "4.46.3";
  }
  return c;
}

// ---- the tensor list --------------------------------------------------------

namespace {

// How one tensor's values are drawn.
enum class Init {
  Normal,      // BF16 or F32: scale * N(0, 1)
  Ones,        // norm weights: 1 + scale * N(0, 1)
  Uniform,     // scale * U(-1, 1) (the router's correction bias)
  Fp8Codes,    // e4m3 codes of N(0, kFp8CodeStd)
  Fp8Scales,   // F32 block scales: scale / kFp8CodeStd * 2^U(-1/2, 1/2)
  Fp8ScalesUe8m0,  // the same rounded to a power of two (scale_fmt "ue8m0")
  Int4Packed,  // I32 words of clamp(round(N(0, kInt4CodeStd)), -8, 7) codes, `cols` columns per row
  Int4Scales,  // BF16 group scales: scale / kInt4CodeStd * 2^U(-1/2, 1/2)
  Int4Shape,   // I64 {out, in}
};

struct GenTensor {
  TensorSpec spec;
  Init init = Init::Normal;
  double scale = 0;  // see Init
  int64_t out = 0, in = 0;  // the logical matrix (quantized tensors)
};

// How a Linear of the checkpoint is stored.
enum class Store { Bf16, Fp8, Int4 };

class TensorList {
public:
  TensorList(std::vector<GenTensor>& out, bool ue8m0_scales) : out_(out), ue8m0_(ue8m0_scales) {}

  void bf16(const std::string& name, std::vector<uint64_t> shape, Init init, double scale) {
    out_.push_back({{name, DType::BF16, std::move(shape)}, init, scale});
  }
  void f32(const std::string& name, std::vector<uint64_t> shape, Init init, double scale) {
    out_.push_back({{name, DType::F32, std::move(shape)}, init, scale});
  }
  void norm(const std::string& name, int64_t n) { bf16(name, {u(n)}, Init::Ones, 0.1); }

  // A Linear [out, in] as `store` keeps it; its values have std 1/sqrt(in).
  void linear(const std::string& prefix, int64_t out, int64_t in, Store store) {
    const double std = 1.0 / std::sqrt(static_cast<double>(in));
    switch (store) {
      case Store::Bf16: bf16(prefix + ".weight", {u(out), u(in)}, Init::Normal, std); break;
      case Store::Fp8:
        out_.push_back({{prefix + ".weight", DType::F8_E4M3, {u(out), u(in)}}, Init::Fp8Codes, 0, out, in});
        out_.push_back({{prefix + ".weight_scale_inv", DType::F32,
                         {u(ceil_div(out, kFp8Block)), u(ceil_div(in, kFp8Block))}},
                        ue8m0_ ? Init::Fp8ScalesUe8m0 : Init::Fp8Scales, std, out, in});
        break;
      case Store::Int4:
        out_.push_back({{prefix + ".weight_packed", DType::I32, {u(out), u(ceil_div(in, 8))}}, Init::Int4Packed, 0, out, in});
        out_.push_back({{prefix + ".weight_scale", DType::BF16, {u(out), u(ceil_div(in, kInt4Group))}},
                        Init::Int4Scales, std, out, in});
        out_.push_back({{prefix + ".weight_shape", DType::I64, {2}}, Init::Int4Shape, 0, out, in});
        break;
    }
  }

  void mlp(const std::string& prefix, int64_t hidden, int64_t inter, Store store) {
    linear(prefix + ".gate_proj", inter, hidden, store);
    linear(prefix + ".up_proj", inter, hidden, store);
    linear(prefix + ".down_proj", hidden, inter, store);
  }

private:
  std::vector<GenTensor>& out_;
  bool ue8m0_;
};

// One decoder layer (i may be the MTP layer's index, num_hidden_layers).
void decoder_layer(TensorList& t, const DeepseekV3Dims& d, int64_t i, bool int4_experts) {
  const std::string p = "model.layers." + std::to_string(i);
  const Store dense = int4_experts ? Store::Bf16 : Store::Fp8;  // everything but the routed experts
  const Store routed = int4_experts ? Store::Int4 : Store::Fp8;
  t.norm(p + ".input_layernorm.weight", d.hidden);
  const std::string a = p + ".self_attn";
  if (d.q_lora > 0) {
    t.linear(a + ".q_a_proj", d.q_lora, d.hidden, dense);
    t.norm(a + ".q_a_layernorm.weight", d.q_lora);
    t.linear(a + ".q_b_proj", d.heads * (d.nope + d.rope), d.q_lora, dense);
  } else {
    t.linear(a + ".q_proj", d.heads * (d.nope + d.rope), d.hidden, dense);
  }
  t.linear(a + ".kv_a_proj_with_mqa", d.kv_lora + d.rope, d.hidden, dense);
  t.norm(a + ".kv_a_layernorm.weight", d.kv_lora);
  t.linear(a + ".kv_b_proj", d.heads * (d.nope + d.v_dim), d.kv_lora, dense);
  t.linear(a + ".o_proj", d.hidden, d.heads * d.v_dim, dense);
  t.norm(p + ".post_attention_layernorm.weight", d.hidden);
  if (i < d.dense_layers) {
    t.mlp(p + ".mlp", d.hidden, d.intermediate, dense);
    return;
  }
  t.bf16(p + ".mlp.gate.weight", {u(d.experts), u(d.hidden)}, Init::Normal, 1.0 / std::sqrt(double(d.hidden)));
  // F32 in the releases; random (not DeepSeek's zero init) so routing depends on it.
  t.f32(p + ".mlp.gate.e_score_correction_bias", {u(d.experts)}, Init::Uniform, 0.1);
  for (int64_t e = 0; e < d.experts; ++e)
    t.mlp(p + ".mlp.experts." + std::to_string(e), d.hidden, d.moe_intermediate, routed);
  t.mlp(p + ".mlp.shared_experts", d.hidden, d.shared * d.moe_intermediate, dense);
}

std::vector<GenTensor> gen_tensors(DeepseekV3Flavor flavor, const DeepseekV3Dims& d) {
  const DeepseekV3Release r = deepseek_v3_release(flavor);
  const bool int4 = r.int4_experts;
  std::vector<GenTensor> out;
  TensorList t(out, r.ue8m0_scales);
  t.bf16("model.embed_tokens.weight", {u(d.vocab), u(d.hidden)}, Init::Normal, 1.0);
  for (int64_t i = 0; i < d.layers; ++i) decoder_layer(t, d, i, int4);
  t.norm("model.norm.weight", d.hidden);
  t.bf16("lm_head.weight", {u(d.vocab), u(d.hidden)}, Init::Normal, 1.0 / std::sqrt(double(d.hidden)));
  for (int64_t m = 0; m < d.mtp; ++m) {  // the MTP module, after the main layers
    const int64_t L = d.layers + m;
    const std::string p = "model.layers." + std::to_string(L);
    t.bf16(p + ".embed_tokens.weight", {u(d.vocab), u(d.hidden)}, Init::Normal, 1.0);
    t.norm(p + ".enorm.weight", d.hidden);
    t.norm(p + ".hnorm.weight", d.hidden);
    t.bf16(p + ".eh_proj.weight", {u(d.hidden), u(2 * d.hidden)}, Init::Normal, 1.0 / std::sqrt(double(2 * d.hidden)));
    decoder_layer(t, d, L, int4);
    t.norm(p + ".shared_head.norm.weight", d.hidden);
    t.bf16(p + ".shared_head.head.weight", {u(d.vocab), u(d.hidden)}, Init::Normal, 1.0 / std::sqrt(double(d.hidden)));
  }
  return out;
}

}  // namespace

}  // namespace deltafin

namespace deltafin {

std::vector<TensorSpec> deepseek_v3_tensor_specs(DeepseekV3Flavor flavor, const DeepseekV3Dims& dims) {
  std::vector<TensorSpec> out;
  for (const GenTensor& g : gen_tensors(flavor, dims)) out.push_back(g.spec);
  return out;
}

uint64_t deepseek_v3_expert_bytes(DeepseekV3Flavor flavor, const DeepseekV3Dims& d) {
  DeepseekV3Dims one = d;
  one.layers = 1, one.dense_layers = 0, one.mtp = 0, one.experts = 1;
  uint64_t n = 0;
  for (const GenTensor& g : gen_tensors(flavor, one))
    if (g.spec.name.find(".mlp.experts.0.") != std::string::npos) n += g.spec.bytes();
  return n;
}

// ---- encoders -----------------------------------------------------------------

uint8_t e4m3_from_double(double x) {
  if (std::isnan(x)) fail("e4m3_from_double: NaN has no code to be written");
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(x);
  if (a >= 448.0) return sign | 0x7E;  // saturate: 0x7F is NaN, and e4m3fn has no infinity
  if (a == 0.0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);                      // a in [2^(e2-1), 2^e2)
  const int exponent = std::max(e2 - 1, -6);  // below 2^-6 the subnormals share 2^-6's spacing
  const double quantum = std::ldexp(1.0, exponent - 3);  // 3 mantissa bits
  const double steps = std::nearbyint(a / quantum);       // exact division; ties to even
  if (steps < 8) return sign | static_cast<uint8_t>(steps);  // subnormal: exponent field 0
  // steps in [8, 16]: 16 carries into the next binade (mantissa 0).
  const int e = steps == 16 ? exponent + 1 : exponent;
  const int m = steps == 16 ? 0 : static_cast<int>(steps) - 8;
  return sign | static_cast<uint8_t>(((e + 7) << 3) | m);
}

std::vector<int32_t> pack_int4_row(const std::vector<int>& q) {
  std::vector<int32_t> words((q.size() + 7) / 8, 0);
  for (size_t c = 0; c < q.size(); ++c) {
    if (q[c] < -8 || q[c] > 7) fail("pack_int4_row: value ", q[c], " at column ", c, " is outside [-8, 7]");
    const uint32_t nibble = static_cast<uint32_t>(q[c] + 8);
    words[c / 8] = static_cast<int32_t>(static_cast<uint32_t>(words[c / 8]) | (nibble << (4 * (c % 8))));
  }
  return words;
}

namespace {

// ---- random codes -------------------------------------------------------------

// The standard normal quantile, by bisection on erfc (exact to double
// rounding; computed once per process for the code tables below).
double probit(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Codes indexed by 16 random bits: the quantiles (i + 1/2) / 65536 of the
// Gaussian, so a uniform index draws a (quantized) Gaussian. Symmetric.
struct CodeTables {
  std::array<uint8_t, 65536> fp8;
  std::array<int8_t, 65536> int4;
  CodeTables() {
    for (int i = 0; i < 32768; ++i) {
      const double z = probit((i + 0.5) / 65536.0);  // negative half; the other half mirrors it
      fp8[i] = e4m3_from_double(kFp8CodeStd * z);
      fp8[65535 - i] = fp8[i] ^ 0x80;
      const int q = static_cast<int>(std::lround(kInt4CodeStd * z));
      int4[i] = static_cast<int8_t>(std::max(q, -8));
      int4[65535 - i] = static_cast<int8_t>(std::min(-q, 7));
    }
  }
};
const CodeTables& code_tables() {
  static const CodeTables t;
  return t;
}

// ---- writing --------------------------------------------------------------

constexpr size_t kChunk = 4u << 20;

void put_bf16(uint8_t* p, double v) {
  const uint16_t b = f32_to_bf16(static_cast<float>(v));
  p[0] = static_cast<uint8_t>(b), p[1] = static_cast<uint8_t>(b >> 8);
}
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// A float tensor (BF16 or F32), element by element.
void write_floats(SafetensorsWriter& w, const GenTensor& g, Rng& rng, Progress& progress) {
  const size_t esize = dtype_size(g.spec.dtype);
  const uint64_t total = g.spec.bytes();
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(total, kChunk)));
  for (uint64_t done = 0; done < total;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), total - done));
    for (size_t i = 0; i < n; i += esize) {
      double v = 0;
      switch (g.init) {
        case Init::Normal: v = g.scale * rng.normal(); break;
        case Init::Ones: v = 1.0 + g.scale * rng.normal(); break;
        case Init::Uniform: v = g.scale * (2.0 * rng.uniform() - 1.0); break;
        case Init::Fp8Scales: v = g.scale / kFp8CodeStd * std::exp2(rng.uniform() - 0.5); break;
        case Init::Fp8ScalesUe8m0: v = std::exp2(std::round(std::log2(g.scale / kFp8CodeStd) + rng.uniform() - 0.5)); break;
        case Init::Int4Scales: v = g.scale / kInt4CodeStd * std::exp2(rng.uniform() - 0.5); break;
        default: fail("make-model: ", g.spec.name, " is not a float tensor");
      }
      if (esize == 2)
        put_bf16(buf.data() + i, v);
      else
        put_u32(buf.data() + i, f32_bits(static_cast<float>(v)));
    }
    w.append(buf.data(), n);
    progress.add(n);
    done += n;
  }
}

void write_fp8_codes(SafetensorsWriter& w, const GenTensor& g, Rng& rng, Progress& progress) {
  const CodeTables& t = code_tables();
  const uint64_t total = g.spec.bytes();
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(total, kChunk)));
  for (uint64_t done = 0; done < total;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), total - done));
    for (size_t i = 0; i < n; i += 4) {
      const uint64_t r = rng.next();
      for (size_t k = 0; k < 4 && i + k < n; ++k) buf[i + k] = t.fp8[(r >> (16 * k)) & 0xFFFF];
    }
    w.append(buf.data(), n);
    progress.add(n);
    done += n;
  }
}

// Rows of packed INT4 words; the columns past `in` in the last word are zero
// nibbles, as compressed-tensors pads them.
void write_int4_packed(SafetensorsWriter& w, const GenTensor& g, Rng& rng, Progress& progress) {
  const CodeTables& t = code_tables();
  const size_t words = static_cast<size_t>(ceil_div(g.in, 8));
  const size_t rows_per_chunk = std::max<size_t>(1, kChunk / (4 * words));
  std::vector<int> row(static_cast<size_t>(g.in));
  std::vector<uint8_t> buf;
  for (int64_t r0 = 0; r0 < g.out;) {
    const int64_t rows = std::min<int64_t>(static_cast<int64_t>(rows_per_chunk), g.out - r0);
    buf.assign(static_cast<size_t>(rows) * words * 4, 0);
    for (int64_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < row.size(); c += 4) {
        const uint64_t bits = rng.next();
        for (size_t k = 0; k < 4 && c + k < row.size(); ++k) row[c + k] = t.int4[(bits >> (16 * k)) & 0xFFFF];
      }
      const std::vector<int32_t> packed = pack_int4_row(row);
      for (size_t j = 0; j < words; ++j)
        put_u32(buf.data() + (static_cast<size_t>(r) * words + j) * 4, static_cast<uint32_t>(packed[j]));
    }
    w.append(buf.data(), buf.size());
    progress.add(buf.size());
    r0 += rows;
  }
}

void write_tensor(SafetensorsWriter& w, const GenTensor& g, uint64_t seed, Progress& progress) {
  Rng rng(seed ^ fnv1a64(g.spec.name));
  switch (g.init) {
    case Init::Fp8Codes: write_fp8_codes(w, g, rng, progress); break;
    case Init::Int4Packed: write_int4_packed(w, g, rng, progress); break;
    case Init::Int4Shape: {
      uint8_t b[16];
      store_u64le(b, static_cast<uint64_t>(g.out));
      store_u64le(b + 8, static_cast<uint64_t>(g.in));
      w.append(b, sizeof b);
      progress.add(sizeof b);
      break;
    }
    default: write_floats(w, g, rng, progress); break;
  }
}

// Consecutive runs of tensors of about shard_bytes each; at least two shards.
std::vector<std::vector<GenTensor>> plan_shards(const std::vector<GenTensor>& tensors, uint64_t shard_bytes) {
  uint64_t total = 0;
  for (const GenTensor& t : tensors) total += t.spec.bytes();
  const uint64_t target = std::max<uint64_t>(1, std::min(shard_bytes, (total + 1) / 2));
  std::vector<std::vector<GenTensor>> shards(1);
  uint64_t current = 0;
  for (const GenTensor& t : tensors) {
    if (!shards.back().empty() && current + t.spec.bytes() > target) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += t.spec.bytes();
  }
  if (shards.size() < 2) {  // one tensor holds most of the bytes: split the list itself
    std::vector<GenTensor> all = shards[0];
    shards.assign(2, {});
    for (size_t i = 0; i < all.size(); ++i) shards[i < (all.size() + 1) / 2 ? 0 : 1].push_back(all[i]);
  }
  return shards;
}

// The flavour's tokenizer files and chat template (tokenizer_files.h).
// The other kind's file is removed: a stale tiktoken.model beside
// tokenizer.json would be read first.
DsChatFlavor tokenizer_flavor(DeepseekV3Flavor f) {
  switch (f) {
    case DeepseekV3Flavor::DeepseekR1: return DsChatFlavor::DeepSeekR1;
    case DeepseekV3Flavor::DeepseekV31: return DsChatFlavor::DeepSeekV31;
    case DeepseekV3Flavor::KimiK2:
    case DeepseekV3Flavor::KimiK2Thinking: return DsChatFlavor::KimiK2;
    default: return DsChatFlavor::DeepSeekV3;
  }
}

void write_tokenizer_files(const std::string& dir, DeepseekV3Flavor flavor, int64_t vocab) {
  fs::remove(fs::path(dir) / (is_kimi_flavor(flavor) ? "tokenizer.json" : "tiktoken.model"));
  write_deepseek_v3_tokenizer_files(dir, tokenizer_flavor(flavor), vocab);
}

void check_dims(DeepseekV3Flavor flavor, const DeepseekV3Dims& d) {
  const std::string who = cat("make-model --arch deepseek_v3 --flavor ", deepseek_v3_flavor_name(flavor), ": ");
  auto positive = [&](int64_t v, const char* what) {
    if (v <= 0) fail(who, what, " must be positive, got ", v);
  };
  positive(d.hidden, "--hidden"), positive(d.layers, "--layers"), positive(d.experts, "--experts");
  positive(d.top_k, "--top-k"), positive(d.moe_intermediate, "--moe-intermediate"), positive(d.vocab, "--vocab");
  positive(d.heads, "num_attention_heads"), positive(d.kv_lora, "kv_lora_rank"), positive(d.nope, "qk_nope_head_dim");
  positive(d.v_dim, "v_head_dim"), positive(d.n_group, "n_group"), positive(d.topk_group, "topk_group");
  if (d.dense_layers > 0) positive(d.intermediate, "--intermediate");
  if (d.rope < 2 || d.rope % 2) fail(who, "qk_rope_head_dim must be even and at least 2, got ", d.rope);
  if (d.layers <= d.dense_layers)
    fail(who, "--layers ", d.layers, " leaves no MoE layer after the ", d.dense_layers, " dense ones (first_k_dense_replace)");
  if (d.experts % d.n_group)
    fail(who, "--experts ", d.experts, " is not a multiple of n_group ", d.n_group);
  if (d.experts / d.n_group < 2)
    fail(who, "--experts ", d.experts, " leaves fewer than 2 experts per group (n_group ", d.n_group,
         "); the group score is the sum of a group's top 2");
  if (d.topk_group > d.n_group) fail(who, "topk_group ", d.topk_group, " exceeds n_group ", d.n_group);
  if (d.top_k > d.topk_group * (d.experts / d.n_group))
    fail(who, "--top-k ", d.top_k, " exceeds the ", d.topk_group * (d.experts / d.n_group),
         " experts of the topk_group groups kept");
  if (d.mtp != 0 && d.mtp != 1) fail(who, "num_nextn_predict_layers must be 0 or 1, got ", d.mtp);
  if (deepseek_v3_release(flavor).int4_experts && (d.hidden % kInt4Group || d.moe_intermediate % kInt4Group))
    fail(who, "--hidden ", d.hidden, " and --moe-intermediate ", d.moe_intermediate,
         " must be multiples of the INT4 group size ", kInt4Group);
  if (is_kimi_flavor(flavor) && d.vocab < 256 + 257)
    fail(who, "--vocab ", d.vocab, " is too small: 256 byte tokens + merges + 256 reserved ids");
  const int64_t added = static_cast<int64_t>(deepseek_v3_added_tokens(tokenizer_flavor(flavor)).size());
  if (!is_kimi_flavor(flavor) && d.vocab < 3 + 256 + 1 + added)
    fail(who, "--vocab ", d.vocab, " is too small: 3 special + 256 byte tokens + merges + ", added, " added tokens");
}

}  // namespace

DeepseekV3GenerateResult generate_deepseek_v3_checkpoint(const DeepseekV3GenerateOptions& o) {
  if (o.out_dir.empty()) fail("make-model: no output directory");
  check_dims(o.flavor, o.dims);
  const json config = deepseek_v3_config_json(o.flavor, o.dims);
  // Our own config goes through the runtime's parser first: the maker never
  // writes a checkpoint the runtime would refuse.
  parse_deepseek_v3_config(config, "generated config.json");
  const std::vector<GenTensor> tensors = gen_tensors(o.flavor, o.dims);
  prepare_checkpoint_dir(o.out_dir, o.force);
  write_tokenizer_files(o.out_dir, o.flavor, o.dims.vocab);

  const std::vector<std::vector<GenTensor>> shards = plan_shards(tensors, o.shard_bytes);
  uint64_t total = 0;
  for (const GenTensor& t : tensors) total += t.spec.bytes();
  Progress progress("make-model", total, o.progress);
  json weight_map = json::object();
  const int n = static_cast<int>(shards.size());
  for (int s = 0; s < n; ++s) {
    const std::string name = shard_file_name(s + 1, n);  // model-00001-of-000163, as DeepSeek and Kimi name them
    std::vector<TensorSpec> specs;
    for (const GenTensor& t : shards[s]) specs.push_back(t.spec);
    SafetensorsWriter w((fs::path(o.out_dir) / name).string(), specs, {{"format", "pt"}});
    for (const GenTensor& t : shards[s]) {
      write_tensor(w, t, o.seed, progress);
      weight_map[t.spec.name] = name;
    }
    w.commit();
  }
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic((fs::path(o.out_dir) / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  // config.json last: its presence marks a complete checkpoint.
  write_file_atomic((fs::path(o.out_dir) / "config.json").string(), config.dump(2) + "\n");
  progress.finish();

  DeepseekV3GenerateResult r;
  r.config = config;
  r.payload_bytes = total;
  r.shards = n;
  r.tensors = tensors.size();
  r.seconds = progress.seconds();
  return r;
}

}  // namespace deltafin
