// YaRN of the DSpark drafter (k3-model.md §10.2) against values worked out by
// hand: the correction range of the real config (low 15, high 26), inverse
// frequencies of pairs on both sides of and inside the ramp, the attention
// scale, and one rotation checked against float64 trigonometry.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/k3_dspark/config.h"
#include "model/k3_dspark/yarn.h"
#include "util/error.h"
#include "util/numeric.h"

using namespace deltafin;

namespace {

// The released config.json of §10.2, verbatim.
const char* kRealConfig = R"({"architectures": ["K3DSparkModel"], "model_type": "k3_dspark", "hidden_size": 7168, "intermediate_size": 14336,
 "num_hidden_layers": 5, "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512,
 "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": false, "mla_use_output_gate": false,
 "vocab_size": 163840, "rms_norm_eps": 1e-05, "max_position_embeddings": 1048576, "rope_theta": 50000.0,
 "num_target_layers": 5, "target_hidden_size": 7168, "target_num_hidden_layers": 93, "target_layer_ids": [2, 23, 47, 71, 89],
 "mask_token_id": 163837, "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839, "markov_rank": 256,
 "markov_head_type": "vanilla", "enable_confidence_head": true, "confidence_head_with_markov": true,
 "tie_word_embeddings": false, "draft_vocab_size": 163840, "_torchspec_version": "0.1.0", "torch_dtype": "bfloat16",
 "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 32768, "rope_theta": 50000.0,
   "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}})";

DSparkConfig real_config() { return parse_dspark_config(nlohmann::json::parse(kRealConfig), "config.json"); }

void expect_rel(double got, double want, double rel) { EXPECT_NEAR(got, want, rel * std::fabs(want)) << want; }

}  // namespace

TEST(DSparkYarn, CorrectionRangeOfTheRealConfig) {
  // corr(32) = 64·ln(32768/(32·2π)) / (2·ln 50000) = 64·5.093596/21.639557 = 15.0645 -> floor 15
  // corr(1)  = 64·ln(32768/(2π))    / (2·ln 50000) = 64·8.559332/21.639557 = 25.3146 -> ceil 26
  EXPECT_NEAR(yarn_correction_dim(32, 64, 50000, 32768), 15.0645445, 1e-6);
  EXPECT_NEAR(yarn_correction_dim(1, 64, 50000, 32768), 25.3146204, 1e-6);
  DSparkYarn y = make_dspark_yarn(real_config());
  EXPECT_EQ(y.dim, 64);
  EXPECT_EQ(y.low, 15);
  EXPECT_EQ(y.high, 26.0);
  ASSERT_EQ(y.inv_freq.size(), 32u);
}

TEST(DSparkYarn, InverseFrequenciesByHand) {
  DSparkYarn y = make_dspark_yarn(real_config());
  // ramp_i = clamp((i - 15) / 11, 0, 1); inv = base·(1 - ramp) + base/32·ramp.
  // i = 0..15: ramp 0, pure base 50000^(-i/32).
  expect_rel(y.inv_freq[0], 1.0, 1e-7);
  expect_rel(y.inv_freq[10], 0.0340072781554661, 1e-7);  // 50000^(-20/64)
  expect_rel(y.inv_freq[15], 0.00627130337702138, 1e-7);  // 50000^(-30/64)
  // i = 20: ramp 5/11 -> base·(6/11 + 5/352) = base·197/352, base = 50000^(-40/64) = 0.00115649496754324
  expect_rel(y.inv_freq[20], 0.00115649496754324 * 197.0 / 352.0, 1e-7);
  expect_rel(y.inv_freq[20], 6.472429221761893e-04, 1e-7);
  // i = 26, 31: ramp 1, interpolated base/32.
  expect_rel(y.inv_freq[26], 0.00015208517137073172 / 32.0, 1e-7);
  expect_rel(y.inv_freq[31], 2.8046121317087597e-05 / 32.0, 1e-7);
  // Monotone decreasing over all pairs.
  for (size_t i = 1; i < y.inv_freq.size(); ++i) EXPECT_LT(y.inv_freq[i], y.inv_freq[i - 1]) << i;
}

TEST(DSparkYarn, AttentionScaleAndRotationScale) {
  DSparkYarn y = make_dspark_yarn(real_config());
  // 192^-0.5 · (0.1·ln 32 + 1)² = 0.0721687836 · 1.3465735903² = 0.1308608
  EXPECT_NEAR(y.attention_scale, 0.13086079996295005, 1e-8);
  EXPECT_EQ(y.cos_sin_scale, 1.0f);  // mscale / mscale_all_dim = 1
  EXPECT_NEAR(yarn_mscale(32, 1), 1.3465735902799727, 1e-15);
  EXPECT_EQ(yarn_mscale(1, 1), 1.0);
}

TEST(DSparkYarn, SmallRopeDimension) {
  // d = 8 (the generated small drafters): corr(32) = 8·5.093596/21.639557 = 1.883 -> 1,
  // corr(1) = 8·8.559332/21.639557 = 3.164 -> 4.
  DSparkConfig c = real_config();
  c.qk_rope_head_dim = 8;
  DSparkYarn y = make_dspark_yarn(c);
  EXPECT_EQ(y.low, 1);
  EXPECT_EQ(y.high, 4.0);
  ASSERT_EQ(y.inv_freq.size(), 4u);
  // i = 2: ramp 1/3, base 50000^(-4/8) = 1/sqrt(50000); inv = base·(2/3 + 1/96) = base·65/96
  expect_rel(y.inv_freq[2], 1.0 / std::sqrt(50000.0) * 65.0 / 96.0, 1e-7);
  // i = 3: ramp 2/3, base 50000^(-6/8); inv = base·(1/3 + 2/96) = base·34/96
  expect_rel(y.inv_freq[3], std::pow(50000.0, -0.75) * 34.0 / 96.0, 1e-7);
}

TEST(DSparkYarn, EqualBoundsGetTheSmallOffset) {
  // L0 = 1e11, d = 8: corr(32) = 8·ln(1e11/(64π))/21.639557 = 7.403 -> 7; corr(1) = 8.684 -> ceil 9,
  // capped at d - 1 = 7: equal, so high = 7.001 and pair 3 (< 7) keeps ramp 0.
  DSparkConfig c = real_config();
  c.qk_rope_head_dim = 8;
  c.rope.original_max_position_embeddings = 100000000000;
  DSparkYarn y = make_dspark_yarn(c);
  EXPECT_EQ(y.low, 7);
  EXPECT_DOUBLE_EQ(y.high, 7.001);
  expect_rel(y.inv_freq[3], std::pow(50000.0, -0.75), 1e-7);
}

// Found with fuzz_config's harness: a base of 1 made corr() infinite and its
// conversion to int64 undefined (UBSan: "inf is outside the range of
// representable values"); the parser now wants rope_theta > 1. A base just
// above 1 with a tiny beta_fast still puts corr(beta_fast) near 1e24, past
// int64: it is clamped to 2^62 (x86 turned the undefined conversion into
// INT64_MIN, so low became 0, interpolating none of the pairs it should).
TEST(DSparkYarn, ExtremeCorrectionDimensionsStayDefined) {
  DSparkConfig c = real_config();
  c.rope_theta = c.rope.rope_theta = 1.0 + 0x1p-52;
  c.rope.beta_fast = 1e-300;
  c.rope.beta_slow = 1e-301;
  DSparkYarn y = make_dspark_yarn(c);
  EXPECT_EQ(y.low, int64_t{1} << 62);
  EXPECT_EQ(y.high, 63.0);  // min(ceil(corr(beta_slow)) clamped, d - 1)
  ASSERT_EQ(y.inv_freq.size(), 32u);
  // Every pair below low: ramp (i - low) / (high - low) > 1, clamped to 1, so
  // every frequency is divided by the factor 32 (base = theta^(-2i/d) ~ 1).
  for (float f : y.inv_freq) expect_rel(f, 1.0 / 32, 1e-6);

  nlohmann::json j = nlohmann::json::parse(kRealConfig);
  j["rope_theta"] = 1.0, j["rope_parameters"]["rope_theta"] = 1.0;
  try {
    parse_dspark_config(j, "config.json");
    ADD_FAILURE() << "a rotary base of 1 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: field rope_theta = 1.0, expected > 1 (the rotary base)");
  }
}

TEST(DSparkYarn, RotationOfInterleavedPairs) {
  DSparkYarn y = make_dspark_yarn(real_config());
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = bf16_to_f32(f32_to_bf16(static_cast<float>(0.25 * (i % 7) - 0.6)));
  float in[64];
  for (int i = 0; i < 64; ++i) in[i] = x[i];
  const int64_t position = 1234;
  yarn_rotate(y, position, x);
  for (int i = 0; i < 32; ++i) {
    // float64 trigonometry on the hand formula; inv_freq from the closed form.
    double base = std::pow(50000.0, -2.0 * i / 64.0);
    double ramp = std::min(std::max((i - 15.0) / 11.0, 0.0), 1.0);
    double phase = position * (base / 32.0 * ramp + base * (1 - ramp));
    double e = in[2 * i], o = in[2 * i + 1];
    double want_e = e * std::cos(phase) - o * std::sin(phase), want_o = o * std::cos(phase) + e * std::sin(phase);
    // The result is rounded to BF16 (relative 2^-8) and the phase is an fp32
    // product (error <= 1234 · 2^-24 rad): 2^-8 relative plus 1e-4 absolute.
    EXPECT_NEAR(x[2 * i], want_e, std::ldexp(std::fabs(want_e), -8) + 1e-4) << i;
    EXPECT_NEAR(x[2 * i + 1], want_o, std::ldexp(std::fabs(want_o), -8) + 1e-4) << i;
    // Each output is a BF16 value.
    EXPECT_EQ(x[2 * i], bf16_to_f32(f32_to_bf16(x[2 * i])));
  }
}
