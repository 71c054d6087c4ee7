// Qwen3 config.json parsing: a real-shaped config parses to the right values,
// and every option the forward pass does not implement is refused with the
// file and field named.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/qwen3/qwen3_config.h"
#include "support/test_support.h"
#include "util/error.h"

namespace deltafin {
namespace {

using nlohmann::json;

// Qwen3-0.6B's config.json as published (transformers 4.51).
json real_config() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

TEST(Qwen3Config, ParsesARealConfig) {
  Qwen3Config c = parse_qwen3_config(real_config(), "config.json");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // explicit; 1024 / 16 would be 64
  EXPECT_EQ(c.q_dim(), 2048);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.groups(), 2);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 151643);
  ASSERT_EQ(c.eos_token_ids.size(), 1u);
  EXPECT_EQ(c.eos_token_ids[0], 151645);
  // Informational fields are listed, not refused.
  EXPECT_NE(std::find(c.unused_fields.begin(), c.unused_fields.end(), "transformers_version"), c.unused_fields.end());
}

TEST(Qwen3Config, RoundTripsThroughTheGeneratorsJson) {
  Qwen3Config c = parse_qwen3_config(real_config(), "config.json");
  Qwen3Config back = parse_qwen3_config(qwen3_config_json(c), "generated");
  EXPECT_EQ(back.hidden_size, c.hidden_size);
  EXPECT_EQ(back.head_dim, c.head_dim);
  EXPECT_EQ(back.rope_theta, c.rope_theta);
  EXPECT_EQ(back.rms_norm_eps, c.rms_norm_eps);
  EXPECT_EQ(back.tie_word_embeddings, c.tie_word_embeddings);
  EXPECT_EQ(back.eos_token_ids, c.eos_token_ids);
}

TEST(Qwen3Config, HeadDimDefaultsLikeTransformers) {
  json j = real_config();
  j.erase("head_dim");
  EXPECT_EQ(parse_qwen3_config(j, "config.json").head_dim, 64);
  j["head_dim"] = nullptr;
  EXPECT_EQ(parse_qwen3_config(j, "config.json").head_dim, 64);
}

TEST(Qwen3Config, AcceptsRopeParametersAndEosLists) {
  json j = real_config();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  j["eos_token_id"] = {151645, 151643};
  j["layer_types"] = json::array();
  for (int i = 0; i < 28; ++i) j["layer_types"].push_back("full_attention");
  Qwen3Config c = parse_qwen3_config(j, "config.json");
  EXPECT_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
}

// Each mutation is refused with the file name and the field in the message.
// Qwen3's model card enables YaRN for 131k contexts with exactly this object.
TEST(Qwen3Config, ReadsYarnScalingWithHuggingFaceDefaults) {
  json j = real_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  const Qwen3Config c = parse_qwen3_config(j, "config.json");
  EXPECT_TRUE(c.yarn.enabled);
  EXPECT_EQ(c.yarn.factor, 4.0);
  EXPECT_EQ(c.yarn.original_max_position_embeddings, 32768);
  EXPECT_EQ(c.yarn.beta_fast, 32.0);
  EXPECT_EQ(c.yarn.beta_slow, 1.0);
  EXPECT_TRUE(c.yarn.truncate);
  EXPECT_NEAR(c.yarn.attention_factor, 1.1386294361119890, 1e-15);  // 0.1 ln 4 + 1
  // Written back and read again, it is the same configuration.
  const Qwen3Config again = parse_qwen3_config(qwen3_config_json(c), "written");
  EXPECT_EQ(again.yarn.factor, 4.0);
  EXPECT_EQ(again.yarn.attention_factor, c.yarn.attention_factor);
  // Newer transformers put it in rope_parameters; mscale/mscale_all_dim give the factor.
  json k = real_config();
  k.erase("rope_scaling");
  k["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 40}, {"mscale", 1.0},
                          {"mscale_all_dim", 0.5}};
  const Qwen3Config d = parse_qwen3_config(k, "config.json");
  EXPECT_EQ(d.yarn.original_max_position_embeddings, d.max_position_embeddings);
  EXPECT_NEAR(d.yarn.attention_factor, (0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1), 1e-15);
  // Two scalings at once is ambiguous.
  k["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  EXPECT_THROW(parse_qwen3_config(k, "config.json"), Error);
}

TEST(Qwen3Config, RefusesWhatTheRuntimeDoesNotImplement) {
  struct Case {
    const char* field;
    json value;  // null json with erase = true removes the field
    bool erase;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}, false, "rope_scaling.rope_type"},
      {"rope_scaling", {{"rope_type", "yarn"}}, false, "rope_scaling.factor"},
      {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"low_freq_factor", 1}}, false, "low_freq_factor"},
      {"rope_scaling", {{"type", "yarn"}, {"factor", 0.5}}, false, "rope_scaling.factor"},
      {"attention_bias", true, false, "attention_bias"},
      {"mlp_bias", true, false, "mlp_bias"},
      {"hidden_act", "gelu", false, "hidden_act"},
      {"use_sliding_window", true, false, "use_sliding_window"},
      {"torch_dtype", "float16", false, "torch_dtype"},
      {"model_type", "qwen3_moe", false, "model_type"},
      {"architectures", {"Qwen2ForCausalLM"}, false, "architectures"},
      {"num_key_value_heads", 3, false, "num_key_value_heads"},
      {"head_dim", 127, false, "head_dim"},
      {"hidden_size", 0, false, "hidden_size"},
      {"vocab_size", "many", false, "vocab_size"},
      {"rms_norm_eps", -1.0, false, "rms_norm_eps"},
      {"tie_word_embeddings", "yes", false, "tie_word_embeddings"},
      {"intermediate_size", nullptr, true, "intermediate_size"},
      {"rope_theta", nullptr, true, "rope_theta"},
      {"rope_theta", 1.0, false, "rope_theta = 1, expected a RoPE base > 1"},
      {"rope_theta", 0.5, false, "rope_theta = 0.5, expected a RoPE base > 1"},
      {"layer_types", json::array({"sliding_attention"}), false, "layer_types"},
      {"rope_parameters", {{"rope_type", "llama3"}, {"rope_theta", 5e5}}, false, "rope_parameters.rope_type"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    json j = real_config();
    if (c.erase)
      j.erase(c.field);
    else
      j[c.field] = c.value;
    EXPECT_FAILS_WITH(parse_qwen3_config(j, "/ckpt/config.json"), "/ckpt/config.json", c.needle);
  }
  // A base of 1 given only in rope_parameters, with YaRN (whose bounds divide by ln theta).
  json j = real_config();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1.0}, {"factor", 4.0}};
  EXPECT_FAILS_WITH(parse_qwen3_config(j, "/ckpt/config.json"), "/ckpt/config.json",
                    "rope_theta = 1, expected a RoPE base > 1");
}

// A dimension is at most kMaxConfigSize (2^20): before, 2^32 heads of 2^32
// dimensions were accepted and q_dim() overflowed int64 (found with
// fuzz_config's harness), and a value past INT64_MAX wrapped to a negative one
// in the message. The vocabulary and the context keep their own bounds.
TEST(Qwen3Config, DimensionsAreBounded) {
  json j = real_config();
  j["num_attention_heads"] = int64_t{1} << 32, j["num_key_value_heads"] = 1, j["head_dim"] = int64_t{1} << 32;
  EXPECT_FAILS_WITH(parse_qwen3_config(j, "/ckpt/config.json"), "/ckpt/config.json",
                    "field num_attention_heads = 4294967296, expected <= 1048576");
  j = real_config();
  j["hidden_size"] = UINT64_MAX;
  EXPECT_FAILS_WITH(parse_qwen3_config(j, "/ckpt/config.json"), "field hidden_size = 18446744073709551615",
                    "expected <= 1048576");
  j = real_config();
  j["num_hidden_layers"] = (1 << 20) + 1;
  EXPECT_FAILS_WITH(parse_qwen3_config(j, "/ckpt/config.json"), "field num_hidden_layers = 1048577");
  j = real_config();
  j["head_dim"] = 1 << 20, j["num_attention_heads"] = 1 << 20, j["max_position_embeddings"] = int64_t{1} << 40;
  j["vocab_size"] = int64_t{1} << 32;
  const Qwen3Config c = parse_qwen3_config(j, "/ckpt/config.json");  // the largest sizes allowed
  EXPECT_EQ(c.q_dim(), int64_t{1} << 40);
  EXPECT_EQ(c.max_position_embeddings, int64_t{1} << 40);
}

TEST(Qwen3Config, ReadNamesTheFile) {
  test::TempDir dir;
  test::write_bytes(dir.file("config.json"), "{ not json");
  EXPECT_FAILS_WITH(read_qwen3_config(dir.file("config.json")), dir.file("config.json"), "not valid JSON");
  test::write_bytes(dir.file("config.json"), real_config().dump());
  EXPECT_EQ(read_qwen3_config(dir.file("config.json")).hidden_size, 1024);
}

}  // namespace
}  // namespace deltafin
