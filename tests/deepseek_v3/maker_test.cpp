// make-model --arch deepseek_v3 writes the released layout: the config's
// fields and quantization_config, tensor names, dtypes and shapes (FP8 with
// ceil-sized block scales, INT4 packing, the MTP layer), decoded weights of
// the intended scale, the encoders' rounding, the bench sizes, determinism
// and atomic, refusing writes; and the command line reaches it.
#include "model/deepseek_v3/generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "deepseek_v3/reference_deepseek_v3.h"
#include "deepseek_v3/tiny_checkpoint.h"
#include "format/checkpoint.h"
#include "model/deepseek_v3/chat_format.h"
#include "model/deepseek_v3/config.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"
#include "util/sha256.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

DeepseekV3GenerateOptions tiny_options(const std::string& dir, DeepseekV3Flavor flavor, uint64_t seed = 3) {
  DeepseekV3GenerateOptions o;
  o.out_dir = dir;
  o.seed = seed;
  o.flavor = flavor;
  o.dims = deepseek_v3_preset("tiny", flavor);
  o.progress = false;
  return o;
}

json config_of(const std::string& dir) { return json::parse(read_text_file(dir + "/config.json")); }

std::vector<uint8_t> raw(const Checkpoint& c, const std::string& name) {
  const TensorRef t = c.find(name);
  if (!t) throw std::runtime_error("no tensor " + name);
  std::vector<uint8_t> b(t.info->bytes());
  t.shard->read(*t.info, b.data());
  return b;
}

void expect_tensor(const Checkpoint& c, const std::string& name, DType dtype, std::vector<uint64_t> shape) {
  const TensorRef t = c.find(name);
  ASSERT_TRUE(t) << "missing " << name;
  EXPECT_EQ(t.info->dtype, dtype) << name;
  EXPECT_EQ(t.info->shape, shape) << name;
}

TEST(DeepseekV3Maker, ConfigCarriesTheReleasedFields) {
  const std::string& v3 = tiny_checkpoint(DeepseekV3Flavor::DeepseekV3);
  const std::string& k2 = tiny_checkpoint(DeepseekV3Flavor::KimiK2);
  const json a = config_of(v3), q = config_of(tiny_checkpoint(DeepseekV3Flavor::DeepseekV3QProj)), k = config_of(k2),
             t = config_of(tiny_checkpoint(DeepseekV3Flavor::KimiK2Thinking));

  EXPECT_EQ(a["architectures"], json::array({"DeepseekV3ForCausalLM"}));
  EXPECT_EQ(a["model_type"], "deepseek_v3");
  EXPECT_EQ(k["model_type"], "kimi_k2");
  // DeepSeek V3's config.json: YaRN beta 32/1, factor 40 as JSON integers, theta 10000.
  EXPECT_EQ(a["rope_scaling"], json::parse(R"({"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
      "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"})"));
  EXPECT_TRUE(a["rope_scaling"]["beta_fast"].is_number_integer());
  EXPECT_EQ(a["rope_theta"], 10000);
  EXPECT_EQ(a["routed_scaling_factor"], 2.5);
  EXPECT_EQ(a["max_position_embeddings"], 163840);
  EXPECT_EQ(a["num_nextn_predict_layers"], 1);
  EXPECT_EQ(a["n_group"], 4);
  EXPECT_EQ(a["topk_group"], 2);
  EXPECT_EQ(a["q_lora_rank"], 96);
  EXPECT_TRUE(q["q_lora_rank"].is_null());
  for (const char* key : {"scoring_func", "topk_method", "norm_topk_prob", "hidden_act", "num_key_value_heads",
                          "moe_layer_freq", "first_k_dense_replace", "n_shared_experts", "tie_word_embeddings",
                          "rms_norm_eps", "vocab_size", "bos_token_id", "eos_token_id", "torch_dtype"})
    EXPECT_TRUE(a.contains(key) && k.contains(key)) << key;
  EXPECT_EQ(a["scoring_func"], "sigmoid");
  EXPECT_EQ(a["topk_method"], "noaux_tc");
  EXPECT_EQ(a["tie_word_embeddings"], false);
  // Kimi K2-Instruct: beta 1/1 as floats, theta 50000, one group, no MTP, 2.827.
  EXPECT_EQ(k["rope_scaling"], json::parse(R"({"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
      "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"})"));
  EXPECT_TRUE(k["rope_scaling"]["beta_fast"].is_number_float());
  EXPECT_EQ(k["rope_theta"], 50000.0);
  EXPECT_EQ(k["n_group"], 1);
  EXPECT_EQ(k["topk_group"], 1);
  EXPECT_EQ(k["num_nextn_predict_layers"], 0);
  EXPECT_EQ(k["routed_scaling_factor"], 2.827);
  EXPECT_EQ(t["rope_scaling"]["factor"], 64.0);
  EXPECT_EQ(t["max_position_embeddings"], 262144);

  // quantization_config exactly as released.
  const json fp8 = json::parse(R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
      "weight_block_size": [128, 128]})");
  EXPECT_EQ(a["quantization_config"], fp8);
  EXPECT_EQ(k["quantization_config"], fp8);
  EXPECT_EQ(t["quantization_config"], json::parse(R"({
    "config_groups": {"group_0": {"input_activations": null, "output_activations": null, "targets": ["Linear"],
      "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": 32, "num_bits": 4,
                  "observer": "minmax", "observer_kwargs": {}, "strategy": "group", "symmetric": true, "type": "int"}}},
    "format": "pack-quantized",
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
    "kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"})"));

  // The tokenizer files (stand-ins until the family's own): config's ids inside the vocabulary.
  EXPECT_TRUE(fs::exists(v3 + "/tokenizer.json"));
  EXPECT_TRUE(fs::exists(k2 + "/tiktoken.model"));
  for (const json* c : {&a, &k}) {
    EXPECT_LT((*c)["eos_token_id"].get<int64_t>(), (*c)["vocab_size"].get<int64_t>());
    EXPECT_NE((*c)["eos_token_id"], (*c)["bos_token_id"]);
  }
}

// Each flavour carries its release's tokenizer files and template (the chat
// format recognises which), and the runtime's config parser takes its config.
// V3.1's block scales are powers of two, as its scale_fmt "ue8m0" says.
TEST(DeepseekV3Maker, FlavoursCarryTheirTokenizerTemplateAndScaleFormat) {
  const std::vector<std::pair<DeepseekV3Flavor, DsChatFlavor>> expected = {
      {DeepseekV3Flavor::DeepseekV3, DsChatFlavor::DeepSeekV3},
      {DeepseekV3Flavor::DeepseekR1, DsChatFlavor::DeepSeekR1},
      {DeepseekV3Flavor::DeepseekV31, DsChatFlavor::DeepSeekV31},
      {DeepseekV3Flavor::DeepseekV3QProj, DsChatFlavor::DeepSeekV3},
      {DeepseekV3Flavor::KimiK2, DsChatFlavor::KimiK2},
      {DeepseekV3Flavor::KimiK2Thinking, DsChatFlavor::KimiK2}};
  for (const auto& [make, chat] : expected) {
    const std::string& dir = tiny_checkpoint(make);
    EXPECT_EQ(detect_deepseek_v3_flavor(dir).flavor, chat) << deepseek_v3_flavor_name(make);
    const DeepseekV3Config c = read_deepseek_v3_config(dir + "/config.json");
    EXPECT_EQ(c.q_lora_rank, make == DeepseekV3Flavor::DeepseekV3QProj ? 0 : 96) << deepseek_v3_flavor_name(make);
    EXPECT_EQ(c.quant, make == DeepseekV3Flavor::KimiK2Thinking ? DsQuant::Int4Experts : DsQuant::Fp8Block);
  }
  const std::string& v31 = tiny_checkpoint(DeepseekV3Flavor::DeepseekV31);
  EXPECT_EQ(config_of(v31)["quantization_config"]["scale_fmt"], "ue8m0");
  EXPECT_FALSE(config_of(tiny_checkpoint(DeepseekV3Flavor::DeepseekV3))["quantization_config"].contains("scale_fmt"));
  const Checkpoint c = Checkpoint::open(v31);
  size_t scales = 0;
  for (const std::string& name : c.names()) {
    if (name.find("weight_scale_inv") == std::string::npos) continue;
    const std::vector<uint8_t> b = raw(c, name);
    for (size_t i = 0; i < b.size(); i += 4, ++scales) {
      float v;
      std::memcpy(&v, &b[i], 4);
      int e = 0;
      ASSERT_EQ(std::frexp(v, &e), 0.5f) << name << " holds " << v << ", not a power of two";
    }
  }
  EXPECT_GT(scales, 400u);
}

TEST(DeepseekV3Maker, TensorsHaveTheReleasedNamesDtypesAndShapes) {
  const std::string& dir = tiny_checkpoint(DeepseekV3Flavor::DeepseekV3);
  const Checkpoint c = Checkpoint::open(dir);  // checks the index against every shard header
  EXPECT_GE(c.shards().size(), 2u);
  const json index = json::parse(read_text_file(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"].size(), c.tensor_count());
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), c.total_bytes());

  using D = DType;
  expect_tensor(c, "model.embed_tokens.weight", D::BF16, {640, 160});
  expect_tensor(c, "lm_head.weight", D::BF16, {640, 160});
  expect_tensor(c, "model.norm.weight", D::BF16, {160});
  // Layer 0 is dense: intermediate 200 x hidden 160 is 2 x 2 blocks, both partial at the edge.
  expect_tensor(c, "model.layers.0.mlp.gate_proj.weight", D::F8_E4M3, {200, 160});
  expect_tensor(c, "model.layers.0.mlp.gate_proj.weight_scale_inv", D::F32, {2, 2});
  expect_tensor(c, "model.layers.0.mlp.down_proj.weight", D::F8_E4M3, {160, 200});
  expect_tensor(c, "model.layers.0.mlp.down_proj.weight_scale_inv", D::F32, {2, 2});
  EXPECT_FALSE(c.find("model.layers.0.mlp.gate.weight"));
  // MLA: q_a [q_lora, hidden], q_b [H (nope + rope), q_lora], kv_a [kv_lora + rope, hidden],
  // kv_b [H (nope + v), kv_lora], o [hidden, H v]; heads 4, nope 16, rope 8, v 16.
  expect_tensor(c, "model.layers.1.self_attn.q_a_proj.weight", D::F8_E4M3, {96, 160});
  expect_tensor(c, "model.layers.1.self_attn.q_a_proj.weight_scale_inv", D::F32, {1, 2});
  expect_tensor(c, "model.layers.1.self_attn.q_a_layernorm.weight", D::BF16, {96});
  expect_tensor(c, "model.layers.1.self_attn.q_b_proj.weight", D::F8_E4M3, {96, 96});
  expect_tensor(c, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight", D::F8_E4M3, {72, 160});
  expect_tensor(c, "model.layers.1.self_attn.kv_a_layernorm.weight", D::BF16, {64});
  expect_tensor(c, "model.layers.1.self_attn.kv_b_proj.weight", D::F8_E4M3, {128, 64});
  expect_tensor(c, "model.layers.1.self_attn.o_proj.weight", D::F8_E4M3, {160, 64});
  expect_tensor(c, "model.layers.1.self_attn.o_proj.weight_scale_inv", D::F32, {2, 1});
  // MoE: the router in BF16, its bias in F32, FP8 experts and shared expert.
  expect_tensor(c, "model.layers.1.mlp.gate.weight", D::BF16, {16, 160});
  expect_tensor(c, "model.layers.1.mlp.gate.e_score_correction_bias", D::F32, {16});
  expect_tensor(c, "model.layers.3.mlp.experts.15.down_proj.weight", D::F8_E4M3, {160, 96});
  expect_tensor(c, "model.layers.3.mlp.experts.15.down_proj.weight_scale_inv", D::F32, {2, 1});
  expect_tensor(c, "model.layers.3.mlp.shared_experts.up_proj.weight", D::F8_E4M3, {96, 160});
  EXPECT_FALSE(c.find("model.layers.3.mlp.experts.16.up_proj.weight"));
  // The correction bias is random (DeepSeek initialises it to zero, which would not
  // test that routing uses it): distinct values within +-0.1.
  const std::vector<uint8_t> bias = raw(c, "model.layers.2.mlp.gate.e_score_correction_bias");
  std::set<float> values;
  float widest = 0;
  for (size_t i = 0; i < bias.size(); i += 4) {
    float v;
    std::memcpy(&v, &bias[i], 4);
    values.insert(v);
    widest = std::max(widest, std::fabs(v));
  }
  EXPECT_EQ(values.size(), 16u);
  EXPECT_GT(widest, 0.03f);
  EXPECT_LE(widest, 0.1f);
  // The MTP layer, index num_hidden_layers = 4.
  expect_tensor(c, "model.layers.4.embed_tokens.weight", D::BF16, {640, 160});
  expect_tensor(c, "model.layers.4.enorm.weight", D::BF16, {160});
  expect_tensor(c, "model.layers.4.hnorm.weight", D::BF16, {160});
  expect_tensor(c, "model.layers.4.eh_proj.weight", D::BF16, {160, 320});
  expect_tensor(c, "model.layers.4.shared_head.norm.weight", D::BF16, {160});
  expect_tensor(c, "model.layers.4.shared_head.head.weight", D::BF16, {640, 160});
  expect_tensor(c, "model.layers.4.mlp.experts.0.gate_proj.weight", D::F8_E4M3, {96, 160});
  expect_tensor(c, "model.layers.4.self_attn.kv_b_proj.weight_scale_inv", D::F32, {1, 1});
  EXPECT_FALSE(c.find("model.layers.5.input_layernorm.weight"));

  // Every FP8 weight has its scale, and no NaN code (0x7F, 0xFF) anywhere.
  size_t fp8 = 0;
  for (const std::string& name : c.names()) {
    if (c.find(name).info->dtype != D::F8_E4M3) continue;
    ++fp8;
    const std::string base = name.substr(0, name.size() - std::string(".weight").size());
    EXPECT_TRUE(c.find(base + ".weight_scale_inv")) << name;
    for (uint8_t b : raw(c, name)) ASSERT_TRUE(b != 0x7F && b != 0xFF) << name;
  }
  EXPECT_GT(fp8, 200u);
}

TEST(DeepseekV3Maker, K2ThinkingHasInt4ExpertsAndBf16Elsewhere) {
  const Checkpoint c = Checkpoint::open(tiny_checkpoint(DeepseekV3Flavor::KimiK2Thinking));
  using D = DType;
  // gate [96, 160]: 20 words a row, 5 groups of 32; down [160, 96]: 12 words, 3 groups.
  expect_tensor(c, "model.layers.1.mlp.experts.3.gate_proj.weight_packed", D::I32, {96, 20});
  expect_tensor(c, "model.layers.1.mlp.experts.3.gate_proj.weight_scale", D::BF16, {96, 5});
  expect_tensor(c, "model.layers.1.mlp.experts.3.gate_proj.weight_shape", D::I64, {2});
  expect_tensor(c, "model.layers.1.mlp.experts.3.down_proj.weight_packed", D::I32, {160, 12});
  expect_tensor(c, "model.layers.1.mlp.experts.3.down_proj.weight_scale", D::BF16, {160, 3});
  const std::vector<uint8_t> shape = raw(c, "model.layers.1.mlp.experts.3.down_proj.weight_shape");
  EXPECT_EQ(load_u64le(&shape[0]), 160u);
  EXPECT_EQ(load_u64le(&shape[8]), 96u);
  // Attention, dense MLP and shared experts stay BF16 (the ignore list).
  expect_tensor(c, "model.layers.1.self_attn.kv_b_proj.weight", D::BF16, {128, 64});
  expect_tensor(c, "model.layers.0.mlp.up_proj.weight", D::BF16, {200, 160});
  expect_tensor(c, "model.layers.2.mlp.shared_experts.down_proj.weight", D::BF16, {160, 96});
  for (const std::string& name : c.names()) {
    EXPECT_NE(c.find(name).info->dtype, D::F8_E4M3) << name;
    EXPECT_EQ(name.find("weight_scale_inv"), std::string::npos) << name;
  }
  EXPECT_FALSE(c.find("model.layers.4.eh_proj.weight"));  // no MTP layer
}

// Decoded weights have std about 1/sqrt(fan-in) (what keeps activations of
// order 1), through the reference's own decoders.
double decoded_std_ratio_fp8(const Checkpoint& c, const std::string& base) {
  const TensorRef w = c.find(base + ".weight");
  const uint64_t rows = w.info->shape[0], cols = w.info->shape[1];
  const std::vector<uint8_t> codes = raw(c, base + ".weight");
  const std::vector<uint8_t> sb = raw(c, base + ".weight_scale_inv");
  const uint64_t scols = (cols + 127) / 128;
  double s2 = 0;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t k = 0; k < cols; ++k) {
      float s;
      std::memcpy(&s, &sb[4 * ((r / 128) * scols + k / 128)], 4);
      const double v = dsv3_e4m3_value(codes[r * cols + k]) * s;
      s2 += v * v;
    }
  return std::sqrt(s2 / double(rows * cols)) * std::sqrt(double(cols));
}

double decoded_std_ratio_int4(const Checkpoint& c, const std::string& base) {
  const TensorRef p = c.find(base + ".weight_packed");
  const uint64_t rows = p.info->shape[0], words = p.info->shape[1];
  const std::vector<uint8_t> pb = raw(c, base + ".weight_packed"), sb = raw(c, base + ".weight_scale");
  const std::vector<uint8_t> shape = raw(c, base + ".weight_shape");
  const uint64_t cols = load_u64le(&shape[8]), groups = (cols + 31) / 32;
  double s2 = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> w(words);
    std::memcpy(w.data(), &pb[r * words * 4], words * 4);
    const std::vector<int> q = dsv3_unpack_int4_row(w.data(), static_cast<int64_t>(cols));
    for (uint64_t k = 0; k < cols; ++k) {
      const uint32_t bits = static_cast<uint32_t>(load_u16le(&sb[2 * (r * groups + k / 32)])) << 16;
      float s;
      std::memcpy(&s, &bits, 4);
      s2 += (q[k] * s) * (q[k] * s);
    }
  }
  return std::sqrt(s2 / double(rows * cols)) * std::sqrt(double(cols));
}

// A tiny matrix has one or two scale blocks, each scale 2^U(-1/2, 1/2) around
// its target, so single matrices range over 0.7 - 1.4: pooled over a layer's
// 48 expert matrices the mean square is E[4^u] = 1.5 / ln 4 = 1.082 (ratio
// 1.04) for FP8; for INT4 (5 groups a row) each matrix is close already.
TEST(DeepseekV3Maker, DecodedWeightsHaveStdAboutOneOverSqrtFanIn) {
  const Checkpoint a = Checkpoint::open(tiny_checkpoint(DeepseekV3Flavor::DeepseekV3));
  const Checkpoint b = Checkpoint::open(tiny_checkpoint(DeepseekV3Flavor::KimiK2Thinking));
  double fp8_ms = 0;
  int n = 0;
  for (int e = 0; e < 16; ++e)
    for (const char* m : {"gate_proj", "up_proj", "down_proj"}) {
      const double r = decoded_std_ratio_fp8(a, "model.layers.2.mlp.experts." + std::to_string(e) + "." + m);
      EXPECT_GT(r, 0.6) << e << m;
      EXPECT_LT(r, 1.6) << e << m;
      fp8_ms += r * r, ++n;
    }
  EXPECT_NEAR(std::sqrt(fp8_ms / n), 1.04, 0.08);
  for (const char* base : {"model.layers.1.mlp.experts.0.up_proj", "model.layers.3.mlp.experts.9.down_proj",
                           "model.layers.2.mlp.experts.15.gate_proj"}) {
    const double r = decoded_std_ratio_int4(b, base);
    EXPECT_GT(r, 0.8) << base;
    EXPECT_LT(r, 1.3) << base;
  }
}

TEST(DeepseekV3Maker, E4m3EncoderRoundsToNearestEvenAndNeverWritesNaN) {
  // Every finite code survives decode (the reference's decoder) then encode.
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;
    EXPECT_EQ(e4m3_from_double(dsv3_e4m3_value(static_cast<uint8_t>(code))), code) << "code " << code;
  }
  EXPECT_EQ(e4m3_from_double(1.0625), 0x38);   // halfway 1 (mantissa 0) and 1.125 (1): to even, 1
  EXPECT_EQ(e4m3_from_double(1.1875), 0x3A);   // halfway 1.125 (1) and 1.25 (2): to even, 1.25
  EXPECT_EQ(e4m3_from_double(1.19), 0x3A);
  EXPECT_EQ(e4m3_from_double(1.18), 0x39);
  EXPECT_EQ(e4m3_from_double(15.5), 0x58);     // halfway 15 (mantissa 7) and 16: to even, 16 = 2^4 (the next binade)
  EXPECT_EQ(e4m3_from_double(std::ldexp(1.0, -10)), 0x00);      // half the smallest subnormal: to even, 0
  EXPECT_EQ(e4m3_from_double(3 * std::ldexp(1.0, -10)), 0x02);  // 1.5 subnormal steps: to even, 2
  EXPECT_EQ(e4m3_from_double(std::ldexp(15.0, -10)), 0x08);     // 7.5 steps: rounds up into the first normal
  EXPECT_EQ(e4m3_from_double(-2.0), 0xC0);
  EXPECT_EQ(e4m3_from_double(460.0), 0x7E);    // saturates at 448, never 0x7F
  EXPECT_EQ(e4m3_from_double(1e30), 0x7E);
  EXPECT_EQ(e4m3_from_double(-1e30), 0xFE);
  EXPECT_THROW(e4m3_from_double(std::nan("")), Error);
}

TEST(DeepseekV3Maker, Int4PackerUsesCompressedTensorsLayout) {
  std::vector<int> q;
  for (int v = -8; v <= 7; ++v) q.push_back(v);
  q.push_back(3);  // a 17th column: a third word, padded with zero nibbles
  const std::vector<int32_t> w = pack_int4_row(q);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(static_cast<uint32_t>(w[0]), 0x76543210u);
  EXPECT_EQ(static_cast<uint32_t>(w[1]), 0xFEDCBA98u);
  EXPECT_EQ(static_cast<uint32_t>(w[2]), 0x0000000Bu);
  EXPECT_EQ(dsv3_unpack_int4_row(w.data(), 17), q);
  EXPECT_THROW(pack_int4_row({8}), Error);
}

TEST(DeepseekV3Maker, BenchPresetsHaveTheRealExpertSizes) {
  // DeepSeek V3: 3 x 7168 x 2048 FP8 codes + 3 x 16 x 56 F32 scales.
  const DeepseekV3Dims v3 = deepseek_v3_preset("bench", DeepseekV3Flavor::DeepseekV3);
  EXPECT_EQ(v3.hidden, 7168);
  EXPECT_EQ(v3.moe_intermediate, 2048);
  EXPECT_EQ(deepseek_v3_expert_bytes(DeepseekV3Flavor::DeepseekV3, v3), 3ull * 7168 * 2048 + 3ull * 16 * 56 * 4);
  EXPECT_EQ(deepseek_v3_expert_bytes(DeepseekV3Flavor::DeepseekV3, v3), 44050944u);
  // K2-Thinking: per matrix 2048 x 7168 / 8 I32 words, 2048 x 7168 / 32 BF16 scales, 2 I64.
  const DeepseekV3Dims k2t = deepseek_v3_preset("bench", DeepseekV3Flavor::KimiK2Thinking);
  EXPECT_EQ(deepseek_v3_expert_bytes(DeepseekV3Flavor::KimiK2Thinking, k2t),
            3ull * (2048ull * 7168 / 8 * 4 + 2048ull * 7168 / 32 * 2 + 16));
  EXPECT_EQ(deepseek_v3_expert_bytes(DeepseekV3Flavor::KimiK2Thinking, k2t), 24772656u);
  // The whole bench checkpoint, without writing it: 3 MoE layers + the MTP layer of 16
  // experts each, and under 1 GB of everything else (the spine, eh_proj's 205 MB among it).
  uint64_t total = 0, experts = 0;
  for (const TensorSpec& t : deepseek_v3_tensor_specs(DeepseekV3Flavor::DeepseekV3, v3)) {
    total += t.bytes();
    if (t.name.find(".mlp.experts.") != std::string::npos) experts += t.bytes();
  }
  EXPECT_EQ(experts, 4 * 16 * 44050944ull);
  EXPECT_LT(total - experts, 1000000000ull);
}

TEST(DeepseekV3Maker, DeterministicPerSeedAndRefusesToOverwriteWithoutForce) {
  TempDir a, b, c;
  generate_deepseek_v3_checkpoint(tiny_options(a.path(), DeepseekV3Flavor::KimiK2, 5));
  generate_deepseek_v3_checkpoint(tiny_options(b.path(), DeepseekV3Flavor::KimiK2, 5));
  generate_deepseek_v3_checkpoint(tiny_options(c.path(), DeepseekV3Flavor::KimiK2, 6));
  auto hashes = [](const std::string& dir) {
    std::map<std::string, std::string> h;
    for (const auto& e : fs::directory_iterator(dir)) h[e.path().filename().string()] = sha256_file_hex(e.path().string());
    return h;
  };
  EXPECT_EQ(hashes(a.path()), hashes(b.path()));
  const auto ha = hashes(a.path()), hc = hashes(c.path());
  EXPECT_NE(ha.at("model-00001-of-000003.safetensors"), hc.at("model-00001-of-000003.safetensors"));
  EXPECT_EQ(ha.at("config.json"), hc.at("config.json"));

  // A second checkpoint into the same directory: refused, then overwritten with force,
  // the other flavour's tokenizer file removed.
  EXPECT_THROW(generate_deepseek_v3_checkpoint(tiny_options(a.path(), DeepseekV3Flavor::DeepseekV3)), Error);
  DeepseekV3GenerateOptions o = tiny_options(a.path(), DeepseekV3Flavor::DeepseekV3);
  o.force = true;
  generate_deepseek_v3_checkpoint(o);
  EXPECT_EQ(config_of(a.path())["model_type"], "deepseek_v3");
  EXPECT_FALSE(fs::exists(a.file("tiktoken.model")));
  EXPECT_TRUE(fs::exists(a.file("tokenizer.json")));
  for (const auto& e : fs::directory_iterator(a.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(DeepseekV3Maker, RefusesDimensionsTheFamilyCannotHaveNamingTheOption) {
  TempDir dir;
  auto refused = [&](DeepseekV3Flavor f, const std::function<void(DeepseekV3Dims&)>& edit, const std::string& says) {
    DeepseekV3GenerateOptions o = tiny_options(dir.path(), f);
    edit(o.dims);
    try {
      generate_deepseek_v3_checkpoint(o);
      ADD_FAILURE() << "accepted; expected an error saying " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(DeepseekV3Flavor::DeepseekV3, [](DeepseekV3Dims& d) { d.experts = 18; }, "--experts 18 is not a multiple of n_group 4");
  refused(DeepseekV3Flavor::DeepseekV3, [](DeepseekV3Dims& d) { d.top_k = 9; }, "--top-k 9 exceeds the 8 experts");
  refused(DeepseekV3Flavor::KimiK2, [](DeepseekV3Dims& d) { d.layers = 1; }, "--layers 1 leaves no MoE layer");
  refused(DeepseekV3Flavor::KimiK2Thinking, [](DeepseekV3Dims& d) { d.moe_intermediate = 40; }, "multiples of the INT4 group size 32");
  refused(DeepseekV3Flavor::KimiK2, [](DeepseekV3Dims& d) { d.vocab = 400; }, "--vocab 400 is too small");
  EXPECT_FALSE(fs::exists(dir.file("config.json")));
}

TEST(DeepseekV3Maker, MakeModelCommandWritesAFlavour) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(run_command(df("make-model --arch deepseek_v3 --flavor kimi_k2_thinking --quiet --layers 3 --experts 8 --out " +
                           dir.path() + " 2>&1"),
                        &out),
            0)
      << out;
  EXPECT_NE(out.find("flavor kimi_k2_thinking (model_type kimi_k2)"), std::string::npos) << out;
  EXPECT_NE(out.find("INT4"), std::string::npos) << out;
  const json c = config_of(dir.path());
  EXPECT_EQ(c["num_hidden_layers"], 3);
  EXPECT_EQ(c["n_routed_experts"], 8);
  EXPECT_NE(run_command(df("make-model --arch qwen3_moe --flavor kimi_k2 --out " + dir.path() + "/q 2>&1"), &out), 0);
  EXPECT_NE(out.find("--flavor applies only to --arch deepseek_v3"), std::string::npos) << out;
  EXPECT_NE(run_command(df("make-model --arch deepseek_v3 --latent 64 --out " + dir.path() + "/l 2>&1"), &out), 0);
  EXPECT_NE(out.find("--latent"), std::string::npos) << out;
}

}  // namespace
