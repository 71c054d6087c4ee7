// DSpark config.json (k3-model.md §10.2): the released file parses to the
// values it spells; the generator's config for the real K3 is exactly the
// released one; every validation error has its exact message (file, field,
// value found, rule).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/kimi_k3/config.h"
#include "model/kimi_k3/generator.h"
#include "model/k3_dspark/config.h"
#include "model/k3_dspark/generator.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
using nlohmann::json;

namespace {

const char* kReal = R"({"architectures": ["K3DSparkModel"], "model_type": "k3_dspark", "hidden_size": 7168, "intermediate_size": 14336,
 "num_hidden_layers": 5, "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512,
 "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": false, "mla_use_output_gate": false,
 "vocab_size": 163840, "rms_norm_eps": 1e-05, "max_position_embeddings": 1048576, "rope_theta": 50000.0,
 "num_target_layers": 5, "target_hidden_size": 7168, "target_num_hidden_layers": 93, "target_layer_ids": [2, 23, 47, 71, 89],
 "mask_token_id": 163837, "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839, "markov_rank": 256,
 "markov_head_type": "vanilla", "enable_confidence_head": true, "confidence_head_with_markov": true,
 "tie_word_embeddings": false, "draft_vocab_size": 163840, "_torchspec_version": "0.1.0", "torch_dtype": "bfloat16",
 "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 32768, "rope_theta": 50000.0,
   "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}})";

json real() { return json::parse(kReal); }
K3Config real_k3() { return parse_k3_config(k3_config_json(preset_dims("k3")), "k3 config.json"); }
K3Config tiny_k3() { return parse_k3_config(k3_config_json(preset_dims("tiny")), "k3 config.json"); }

// The message of the deltafin::Error fn throws ("" if none).
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const json& j) {
  return error_of([&] { parse_dspark_config(j, "dspark/config.json"); });
}

json with(json j, const std::string& pointer, const json& value) {
  j[json::json_pointer(pointer)] = value;
  return j;
}
json without(json j, const std::string& pointer) {
  json::json_pointer p(pointer);
  j[p.parent_pointer()].erase(p.back());
  return j;
}

}  // namespace

TEST(DSparkConfig, ReleasedConfigParses) {
  DSparkConfig c = parse_dspark_config(real(), "config.json");
  EXPECT_EQ(c.model_type, "k3_dspark");
  EXPECT_EQ(c.architectures, std::vector<std::string>{"K3DSparkModel"});
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.num_key_value_heads, 64);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.qk_head_dim(), 192);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  EXPECT_EQ(c.rope_theta, 50000.0);
  EXPECT_EQ(c.num_target_layers, 5);
  EXPECT_EQ(c.target_hidden_size, 7168);
  EXPECT_EQ(c.target_num_hidden_layers, 93);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int64_t>{2, 23, 47, 71, 89}));
  EXPECT_EQ(c.context_width(), 35840);
  EXPECT_EQ(c.mask_token_id, 163837);
  EXPECT_EQ(c.bos_token_id, 163584);
  EXPECT_EQ(c.eos_token_id, 163586);
  EXPECT_EQ(c.pad_token_id, 163839);
  EXPECT_EQ(c.markov_rank, 256);
  EXPECT_EQ(c.markov_head_type, "vanilla");
  EXPECT_TRUE(c.enable_confidence_head);
  EXPECT_TRUE(c.confidence_head_with_markov);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.mla_use_nope);
  EXPECT_FALSE(c.mla_use_output_gate);
  EXPECT_EQ(c.draft_vocab_size, 163840);
  EXPECT_EQ(c.torchspec_version, "0.1.0");
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.rope.rope_type, "yarn");
  EXPECT_EQ(c.rope.factor, 32.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 32768);
  EXPECT_EQ(c.rope.rope_theta, 50000.0);
  EXPECT_EQ(c.rope.beta_fast, 32.0);
  EXPECT_EQ(c.rope.beta_slow, 1.0);
  EXPECT_EQ(c.rope.mscale, 1.0);
  EXPECT_EQ(c.rope.mscale_all_dim, 1.0);
  EXPECT_EQ(error_of([&] { validate_dspark_for_target(c, real_k3(), "config.json"); }), "");
}

TEST(DSparkConfig, GeneratorWritesTheReleasedConfigForTheRealTarget) {
  const K3Config k3 = real_k3();
  EXPECT_EQ(dspark_config_json(dspark_dims_for_target(k3), k3), real());
}

TEST(DSparkConfig, GeneratorScalesForTinyTargets) {
  const K3Config k3 = tiny_k3();  // hidden 64, 10 layers, vocab 768
  const json j = dspark_config_json(dspark_dims_for_target(k3), k3);
  DSparkConfig c = parse_dspark_config(j, "generated");
  EXPECT_EQ(error_of([&] { validate_dspark_for_target(c, k3, "generated"); }), "");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int64_t>{1, 3, 5, 7, 9}));  // (2i+1)·10/10
  EXPECT_EQ(c.mask_token_id, 512 + 253);
  EXPECT_EQ(c.markov_rank, 16);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(j["rope_parameters"], real()["rope_parameters"]);
  // Every field of the released config is present, and nothing else.
  const json r = real();
  for (auto it = r.begin(); it != r.end(); ++it) EXPECT_TRUE(j.contains(it.key())) << it.key();
  EXPECT_EQ(j.size(), r.size());
}

TEST(DSparkConfig, ParseErrorsNameFileFieldAndRule) {
  const std::string f = "dspark/config.json: ";
  EXPECT_EQ(parse_error(json::array()), f + "root is not a JSON object");
  EXPECT_EQ(parse_error(without(real(), "/rope_parameters")), f + "field rope_parameters is missing");
  EXPECT_EQ(parse_error(without(real(), "/rope_parameters/beta_fast")), f + "field rope_parameters.beta_fast is missing");
  EXPECT_EQ(parse_error(with(real(), "/model_type", "k3")),
            f + "field model_type = \"k3\", but a DSpark drafter has \"k3_dspark\"");
  EXPECT_EQ(parse_error(with(real(), "/architectures", json::array({"X"}))),
            f + "field architectures = [\"X\"], but a DSpark drafter has [\"K3DSparkModel\"]");
  EXPECT_EQ(parse_error(with(real(), "/hidden_size", "7168")), f + "field hidden_size must be an integer, found \"7168\"");
  EXPECT_EQ(parse_error(with(real(), "/hidden_size", 0)), f + "field hidden_size = 0, expected >= 1");
  EXPECT_EQ(parse_error(with(real(), "/num_key_value_heads", 8)),
            f + "field num_key_value_heads = 8, expected num_attention_heads (64): MLA has one latent shared by all heads");
  EXPECT_EQ(parse_error(with(real(), "/qk_rope_head_dim", 63)),
            f + "field qk_rope_head_dim = 63, expected an even number (rotated in pairs)");
  EXPECT_EQ(parse_error(with(real(), "/mla_use_nope", true)), f + "field mla_use_nope = true, but a DSpark drafter has false");
  EXPECT_EQ(parse_error(with(real(), "/mla_use_output_gate", true)),
            f + "field mla_use_output_gate = true, but a DSpark drafter has false");
  EXPECT_EQ(parse_error(with(real(), "/rms_norm_eps", 0)), f + "field rms_norm_eps = 0, expected > 0");
  EXPECT_EQ(parse_error(with(real(), "/target_layer_ids", json::array({2, 23, 47, 71}))),
            f + "field target_layer_ids has 4 entries, expected num_target_layers = 5");
  EXPECT_EQ(parse_error(with(real(), "/target_layer_ids", json::array({2, 23, 47, 71, 93}))),
            f + "field target_layer_ids has layer 93 outside 0..92 (0-based layers of the target)");
  EXPECT_EQ(parse_error(with(real(), "/target_layer_ids", json::array({-1, 23, 47, 71, 89}))),
            f + "field target_layer_ids has layer -1 outside 0..92 (0-based layers of the target)");
  EXPECT_EQ(parse_error(with(real(), "/target_layer_ids", json::array({2, 23, 23, 71, 89}))),
            f + "field target_layer_ids is not strictly ascending at 23");
  EXPECT_EQ(parse_error(with(real(), "/target_layer_ids", json::array({2, 23, "47", 71, 89}))),
            f + "field target_layer_ids has a non-integer entry \"47\"");
  EXPECT_EQ(parse_error(with(real(), "/markov_head_type", "mlp")),
            f + "field markov_head_type = \"mlp\", but a DSpark drafter has \"vanilla\"");
  EXPECT_EQ(parse_error(with(real(), "/enable_confidence_head", false)),
            f + "field enable_confidence_head = false, but a DSpark drafter has true");
  EXPECT_EQ(parse_error(with(real(), "/tie_word_embeddings", true)),
            f + "field tie_word_embeddings = true, but a DSpark drafter has false");
  EXPECT_EQ(parse_error(with(real(), "/draft_vocab_size", 32000)),
            f + "field draft_vocab_size = 32000, expected vocab_size (163840): DSpark scores the full vocabulary with "
                "the target's lm_head");
  EXPECT_EQ(parse_error(with(real(), "/torch_dtype", "float16")),
            f + "field torch_dtype = \"float16\", but a DSpark drafter has \"bfloat16\"");
  EXPECT_EQ(parse_error(with(real(), "/_torchspec_version", 1)), f + "field _torchspec_version must be a string, found 1");
  EXPECT_EQ(parse_error(with(real(), "/rope_parameters", 3)), f + "field rope_parameters is not a JSON object");
  EXPECT_EQ(parse_error(with(real(), "/rope_parameters/rope_type", "linear")),
            f + "field rope_parameters.rope_type = \"linear\", but a DSpark drafter has \"yarn\"");
  EXPECT_EQ(parse_error(with(real(), "/rope_parameters/factor", 0.5)), f + "field rope_parameters.factor = 0.5, expected >= 1");
  EXPECT_EQ(parse_error(with(real(), "/rope_parameters/rope_theta", 10000.0)),
            f + "field rope_parameters.rope_theta = 10000.0, expected rope_theta (50000.0)");
  EXPECT_EQ(parse_error(with(real(), "/rope_parameters/beta_slow", 32)),
            f + "field rope_parameters.beta_fast = 32, expected > beta_slow (32)");
  EXPECT_EQ(parse_error(with(real(), "/rope_parameters/original_max_position_embeddings", 0)),
            f + "field rope_parameters.original_max_position_embeddings = 0, expected >= 1");
  EXPECT_EQ(parse_error(with(real(), "/rope_parameters/mscale", -1.0)),
            f + "field rope_parameters.mscale = -1.0, expected >= 0");
}

TEST(DSparkConfig, TargetMismatchErrors) {
  const DSparkConfig base = parse_dspark_config(real(), "config.json");
  const K3Config k3 = real_k3();
  auto err = [&](const DSparkConfig& c, const K3Config& t) {
    return error_of([&] { validate_dspark_for_target(c, t, "dspark/config.json"); });
  };
  const std::string f = "dspark/config.json: ";
  EXPECT_EQ(err(base, tiny_k3()), f + "field target_hidden_size = 7168, but the target's hidden_size is 64");
  DSparkConfig c = base;
  c.hidden_size = 4096;
  EXPECT_EQ(err(c, k3), f + "field hidden_size = 4096, but the target's hidden_size is 7168 (DSpark uses the target's "
                            "embedding and lm_head)");
  c = base;
  c.target_num_hidden_layers = 61;
  EXPECT_EQ(err(c, k3), f + "field target_num_hidden_layers = 61, but the target has num_hidden_layers = 93");
  c = base;
  c.target_layer_ids = {2, 23, 47, 71, 95};
  c.target_num_hidden_layers = 96;
  EXPECT_EQ(err(c, k3), f + "field target_num_hidden_layers = 96, but the target has num_hidden_layers = 93");
  c.target_num_hidden_layers = 93;  // parse would refuse id 95; validation checks against the target too
  EXPECT_EQ(err(c, k3), f + "field target_layer_ids has layer 95 outside the target's 0..92");
  c = base;
  c.vocab_size = 163841;
  EXPECT_EQ(err(c, k3), f + "field vocab_size = 163841, but the target's vocab_size is 163840");
  c = base;
  c.mask_token_id = 163838;
  EXPECT_EQ(err(c, k3), f + "field mask_token_id = 163838, expected 163837 (the target's reserved base + 253)");
  c = base;
  c.bos_token_id = 163585;
  EXPECT_EQ(err(c, k3), f + "field bos_token_id = 163585, but the target's bos_token_id is 163584");
  c = base;
  c.eos_token_id = 163585;
  EXPECT_EQ(err(c, k3), f + "field eos_token_id = 163585, but the target's eos_token_id is 163586");
  c = base;
  c.pad_token_id = 163838;
  EXPECT_EQ(err(c, k3), f + "field pad_token_id = 163838, but the target's pad_token_id is 163839");
}

// A dimension is at most kMaxConfigSize (2^20): before, target_hidden_size =
// 2^62 was accepted and context_width() (5 layers x 2^62) overflowed int64
// (found with fuzz_config's harness).
TEST(DSparkConfig, DimensionsAreBounded) {
  const std::string f = "dspark/config.json: ";
  EXPECT_EQ(parse_error(with(real(), "/target_hidden_size", int64_t{1} << 62)),
            f + "field target_hidden_size = 4611686018427387904, expected <= 1048576");
  EXPECT_EQ(parse_error(with(real(), "/num_target_layers", UINT64_MAX)),
            f + "field num_target_layers = 18446744073709551615, expected <= 1048576");
  EXPECT_EQ(parse_error(with(with(real(), "/vocab_size", int64_t{1} << 33), "/draft_vocab_size", int64_t{1} << 33)),
            f + "field vocab_size = 8589934592, expected <= 4294967296");
  const DSparkConfig c = parse_dspark_config(with(real(), "/target_hidden_size", 1 << 20), "dspark/config.json");
  EXPECT_EQ(c.context_width(), int64_t{5} << 20);  // the largest width allowed
}

TEST(DSparkConfig, ReadingAFileNamesIt) {
  test::TempDir dir;
  const std::string path = dir.file("config.json");
  test::write_bytes(path, "{not json");
  std::string e = error_of([&] { read_dspark_config(path); });
  EXPECT_EQ(e.rfind(path + ": not valid JSON", 0), 0u) << e;
  test::write_bytes(path, with(real(), "/model_type", "kimi_k3").dump());
  EXPECT_EQ(error_of([&] { read_dspark_config(path); }),
            path + ": field model_type = \"kimi_k3\", but a DSpark drafter has \"k3_dspark\"");
  test::write_bytes(path, real().dump());
  EXPECT_EQ(read_dspark_config(path).hidden_size, 7168);
  EXPECT_NE(error_of([&] { read_dspark_config(dir.file("absent.json")); }).find(dir.file("absent.json")), std::string::npos);
}
