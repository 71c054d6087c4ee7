// The float64 reference of the DeepSeek-V3 family checks itself where it can
// fail: its pieces against values worked by hand (YaRN, routing, the RoPE
// interleave, FP8 and INT4 decoding), and the whole pass on tiny generated
// checkpoints (causality, the grouped routing's effect, beta_fast read from
// config.json, the INT4 flavour, the MTP module).
#include "deepseek_v3/reference_deepseek_v3.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "deepseek_v3/tiny_checkpoint.h"
#include "model/deepseek_v3/generator.h"
#include "support/test_support.h"
#include "util/file.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ---- YaRN ------------------------------------------------------------------------
//
// Worked by hand for dim 8 (4 pairs), theta 10^4, factor 4, original 64 positions:
//   freq_extra[i] = 10^4^(-2i/8) = 10^-i = 1, 0.1, 0.01, 0.001; freq_inter = freq_extra / 4.
//   correction_dim(r) = 8 ln(64 / (2 pi r)) / (2 ln 10^4) = 8 ln(10.1859 / r) / 18.4207:
//     r = 4 (beta_fast): 8 * 0.93471 / 18.4207 = 0.40594 -> floor 0 = low
//     r = 1 (beta_slow): 8 * 2.32101 / 18.4207 = 1.00800 -> ceil  2 = high
//   ramp(i) = clamp((i - 0) / 2, 0, 1) = 0, 0.5, 1, 1; extrapolation share = 1 - ramp = 1, 0.5, 0, 0
//   inv_freq = inter * ramp + extra * (1 - ramp):
//     i0: 1;  i1: 0.025 * 0.5 + 0.1 * 0.5 = 0.0625;  i2: 0.0025;  i3: 0.00025.
//   (DeepSeek's round() instead of floor/ceil would give high 1 and 0.025 at i1.)
// With beta_fast = beta_slow = 1 (Kimi K2's choice): low = floor(1.008) = 1, high = ceil(1.008) = 2:
//   ramp = 0, 0, 1, 1 -> inv_freq = 1, 0.1, 0.0025, 0.00025.
DsYarn hand_yarn(double beta_fast, double beta_slow) {
  DsYarn y;
  y.enabled = true;
  y.theta = 10000, y.factor = 4, y.original_max_positions = 64;
  y.beta_fast = beta_fast, y.beta_slow = beta_slow;
  y.mscale = 1, y.mscale_all_dim = 1;
  return y;
}

TEST(DeepseekV3Reference, YarnInverseFrequenciesMatchTheHandComputedValues) {
  const std::vector<double> f = dsv3_inv_freq(8, hand_yarn(4, 1));
  ASSERT_EQ(f.size(), 4u);
  const double want[4] = {1.0, 0.0625, 0.0025, 0.00025};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], want[i], 1e-15 * (1 + want[i])) << "pair " << i;
}

TEST(DeepseekV3Reference, YarnBetaComesFromTheConfigNotFrom32) {
  // Kimi K2's beta 1/1: the ramp moves one pair up.
  const std::vector<double> k2 = dsv3_inv_freq(8, hand_yarn(1, 1));
  const double want[4] = {1.0, 0.1, 0.0025, 0.00025};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(k2[i], want[i], 1e-15) << "pair " << i;
  // beta_fast 32 (what a runtime assuming DeepSeek's values uses): correction_dim(32) = -0.497 -> low 0.
  const std::vector<double> v3 = dsv3_inv_freq(8, hand_yarn(32, 1));
  EXPECT_NEAR(v3[1], 0.0625, 1e-15);
  // Without YaRN: plain RoPE frequencies.
  DsYarn off = hand_yarn(32, 1);
  off.enabled = false;
  const std::vector<double> plain = dsv3_inv_freq(8, off);
  EXPECT_NEAR(plain[1], 0.1, 1e-15);
  EXPECT_NEAR(plain[3], 0.001, 1e-15);
}

TEST(DeepseekV3Reference, YarnAttentionFactorAndSoftmaxScale) {
  // get_mscale(4, m) = 0.1 m ln 4 + 1: m = 1 -> 1.1386294361, m = 2 -> 1.2772588722.
  DsYarn y = hand_yarn(32, 1);
  EXPECT_DOUBLE_EQ(dsv3_rope_attention_factor(y), 1.0);  // mscale = mscale_all_dim = 1, as every release
  y.mscale = 2;
  EXPECT_NEAR(dsv3_rope_attention_factor(y), 1.2772588722239781 / 1.1386294361119891, 1e-15);  // 1.1217511437
  y.mscale = 0;  // absent: transformers falls back to get_mscale(factor) = 1.1386, not 1
  EXPECT_NEAR(dsv3_rope_attention_factor(y), 1.1386294361119891, 1e-15);
  y.attention_factor = 0.75;  // given: wins
  EXPECT_DOUBLE_EQ(dsv3_rope_attention_factor(y), 0.75);
  // qk_head_dim 24: 24^-0.5 = 0.2041241452; times get_mscale(4, 1)^2 = 1.2964770 -> 0.2646422580.
  EXPECT_NEAR(dsv3_softmax_scale(24, hand_yarn(32, 1)), 0.2646422579642267, 1e-15);
  DsYarn no_all_dim = hand_yarn(32, 1);
  no_all_dim.mscale_all_dim = 0;
  EXPECT_NEAR(dsv3_softmax_scale(24, no_all_dim), 0.2041241452319315, 1e-15);
}

// ---- RoPE interleave --------------------------------------------------------------------
// x = [1, 2, 3, 4] at position 1 with inv_freq [pi/2, pi]: pair (x0, x1) = (1, 2)
// turns by 90 degrees to (-2, 1), pair (x2, x3) = (3, 4) by 180 degrees to
// (-3, -4); HF writes [evens | odds] = [-2, -3, 1, -4]. (rotate_half on the
// raw vector would pair x0 with x2 instead: [-3, -4, 1, 2] at these angles.)
TEST(DeepseekV3Reference, RopeRotatesAdjacentPairsAndWritesEvensThenOdds) {
  const std::vector<double> out = dsv3_rope_interleaved({1, 2, 3, 4}, {M_PI / 2, M_PI}, 1.0, 1.0);
  const double want[4] = {-2, -3, 1, -4};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], want[i], 1e-15) << i;
  // The attention factor scales cos and sin alike; position 0 is the identity permuted.
  const std::vector<double> scaled = dsv3_rope_interleaved({1, 2, 3, 4}, {M_PI / 2, M_PI}, 2.0, 0.0);
  const double want0[4] = {2, 6, 4, 8};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(scaled[i], want0[i], 1e-15) << i;
}

// ---- routing -----------------------------------------------------------------------------
// 8 experts in 4 groups of 2, keep 2 groups, top 3, routed_scaling_factor 2.5:
//   scores  0.90 0.15 | 0.60 0.55 | 0.20 0.30 | 0.80 0.05
//   bias    0    0    | 0    0    | 0.50 0    | -0.30 0
//   choice  0.90 0.15 | 0.60 0.55 | 0.70 0.30 | 0.50 0.05
//   group (sum of its top 2): 1.05, 1.15, 1.00, 0.55 -> keep groups 0 and 1
//   top 3 of choice among experts 0-3: 0 (0.90), 2 (0.60), 3 (0.55); expert 4 (0.70) is in a
//   dropped group, expert 6 (score 0.80) lost to its bias.
//   weights: scores 0.90, 0.60, 0.55 / 2.05 * 2.5 = 1.0975610, 0.7317073, 0.6707317.
TEST(DeepseekV3Reference, GroupedRoutingOnAHandMadeScoreVector) {
  const std::vector<double> scores = {0.90, 0.15, 0.60, 0.55, 0.20, 0.30, 0.80, 0.05};
  const std::vector<double> bias = {0, 0, 0, 0, 0.50, 0, -0.30, 0};
  const DsRoute r = dsv3_route(scores, bias, {4, 2, 3, true, 2.5});
  EXPECT_EQ(r.kept_groups, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.experts, (std::vector<int>{0, 2, 3}));
  ASSERT_EQ(r.weights.size(), 3u);
  EXPECT_NEAR(r.weights[0], 0.90 / 2.05 * 2.5, 1e-12);
  EXPECT_NEAR(r.weights[1], 0.60 / 2.05 * 2.5, 1e-12);
  EXPECT_NEAR(r.weights[2], 0.55 / 2.05 * 2.5, 1e-12);
  EXPECT_FALSE(r.hf_zero_fill_differs);

  // Ungrouped (n_group 1, as Kimi K2): top 3 of all choices = 0 (0.90), 4 (0.70), 2 (0.60);
  // weights 0.90, 0.20, 0.60 / 1.70 * 2.5.
  const DsRoute u = dsv3_route(scores, bias, {1, 1, 3, true, 2.5});
  EXPECT_EQ(u.experts, (std::vector<int>{0, 4, 2}));
  EXPECT_NEAR(u.weights[1], 0.20 / 1.70 * 2.5, 1e-12);
  // norm_topk_prob false: the raw scores times the scaling factor.
  const DsRoute raw = dsv3_route(scores, bias, {1, 1, 3, false, 2.5});
  EXPECT_NEAR(raw.weights[0], 0.90 * 2.5, 1e-12);
}

// 8 experts in 2 groups of 4, keep 1 group, top 2. The three possible group rules disagree:
//   group 0 choices 0.90 0.15 0.15 0.15: max 0.90, top-2 sum 1.05, sum of all 1.35
//   group 1 choices 0.60 0.60 0.05 0.05: max 0.60, top-2 sum 1.20, sum of all 1.30
// DeepSeek V3's rule (top-2 sum, with a bias) keeps group 1 -> experts 4 and 5.
TEST(DeepseekV3Reference, GroupScoreIsTheSumOfTheTopTwo) {
  const std::vector<double> scores = {0.90, 0.15, 0.15, 0.15, 0.60, 0.60, 0.05, 0.05};
  const DsRoute r = dsv3_route(scores, std::vector<double>(8, 0.0), {2, 1, 2, true, 1.0});
  EXPECT_EQ(r.kept_groups, (std::vector<int>{1}));
  EXPECT_EQ(r.experts, (std::vector<int>{4, 5}));
  EXPECT_NEAR(r.weights[0], 0.5, 1e-12);
}

// When a kept expert's choice is below zero, transformers' 0.0 fill lets a
// dropped expert outrank it; the route says so.
TEST(DeepseekV3Reference, RouteFlagsWhereTransformersZeroFillWouldDiffer) {
  const std::vector<double> scores = {0.9, 0.1, 0.2, 0.2};
  const std::vector<double> bias = {0, -0.3, 0, 0};  // expert 1's choice is -0.2
  const DsRoute r = dsv3_route(scores, bias, {2, 1, 2, true, 1.0});
  EXPECT_EQ(r.kept_groups, (std::vector<int>{0}));  // 0.7 against 0.4
  EXPECT_EQ(r.experts, (std::vector<int>{0, 1}));
  EXPECT_TRUE(r.hf_zero_fill_differs);
}

// ---- weight decoding ----------------------------------------------------------------------

TEST(DeepseekV3Reference, E4m3DecodesKnownCodes) {
  EXPECT_EQ(dsv3_e4m3_value(0x00), 0.0);
  EXPECT_EQ(dsv3_e4m3_value(0x01), 0.001953125);       // smallest subnormal 2^-9
  EXPECT_EQ(dsv3_e4m3_value(0x07), 7 * 0.001953125);   // largest subnormal
  EXPECT_EQ(dsv3_e4m3_value(0x08), 0.015625);          // smallest normal 2^-6
  EXPECT_EQ(dsv3_e4m3_value(0x38), 1.0);               // exponent 7 = bias
  EXPECT_EQ(dsv3_e4m3_value(0x3C), 1.5);
  EXPECT_EQ(dsv3_e4m3_value(0x40), 2.0);
  EXPECT_EQ(dsv3_e4m3_value(0x7E), 448.0);             // the largest finite value
  EXPECT_EQ(dsv3_e4m3_value(0xFE), -448.0);
  EXPECT_EQ(dsv3_e4m3_value(0xB8), -1.0);
  EXPECT_TRUE(std::signbit(dsv3_e4m3_value(0x80)));
  EXPECT_TRUE(std::isnan(dsv3_e4m3_value(0x7F)));      // e4m3fn: no infinity, one NaN per sign
  EXPECT_TRUE(std::isnan(dsv3_e4m3_value(0xFF)));
  EXPECT_EQ(dsv3_e4m3_value(0x78), 256.0);             // exponent 15 is finite except mantissa 7
}

TEST(DeepseekV3Reference, Int4UnpacksNibblesLowFirstMinusEight) {
  // Word 0x76543210 holds nibbles 0..7 from the low bits: values -8..-1;
  // word 0xFEDCBA98 (negative as int32) holds 8..15: values 0..7.
  const int32_t words[3] = {0x76543210, static_cast<int32_t>(0xFEDCBA98u), 0x000000F8};
  const std::vector<int> q = dsv3_unpack_int4_row(words, 18);
  for (int c = 0; c < 16; ++c) EXPECT_EQ(q[c], c - 8) << "column " << c;
  EXPECT_EQ(q[16], 0);  // nibble 8
  EXPECT_EQ(q[17], 7);  // nibble 15
}

// ---- the whole pass on tiny generated checkpoints ------------------------------------------

const std::string& tiny(DeepseekV3Flavor flavor) { return tiny_checkpoint(flavor); }

// The checkpoint in `dir` seen through another config.json: the shards
// linked, config.json edited by `edit`.
class EditedConfig {
public:
  EditedConfig(const std::string& dir, const std::function<void(json&)>& edit) {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename() != "config.json") fs::create_symlink(e.path(), fs::path(copy_.path()) / e.path().filename());
    json c = json::parse(read_text_file(dir + "/config.json"));
    edit(c);
    write_bytes(copy_.file("config.json"), c.dump(2));
  }
  const std::string& path() const { return copy_.path(); }

private:
  TempDir copy_;
};

const std::vector<uint32_t> kTokens = {17, 400, 3, 255, 91, 600, 42, 8};

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b, size_t from, size_t to) {
  double d = 0;
  for (size_t i = from; i < to; ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(DeepseekV3Reference, LogitsAreFiniteVariedAndCausal) {
  const ReferenceDeepseekV3 ref(tiny(DeepseekV3Flavor::DeepseekV3));
  const size_t V = static_cast<size_t>(ref.vocab());
  const std::vector<double> a = ref.logits(kTokens);
  ASSERT_EQ(a.size(), kTokens.size() * V);
  double lo = a[0], hi = a[0], sum2 = 0;
  for (double v : a) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v), hi = std::max(hi, v), sum2 += v * v;
  }
  const double rms = std::sqrt(sum2 / a.size());
  EXPECT_GT(rms, 0.1) << "logits collapsed";
  EXPECT_LT(rms, 100.0) << "logits blew up";
  // Changing token 5 leaves positions 0-4 exactly as they were and moves 5-7.
  std::vector<uint32_t> changed = kTokens;
  changed[5] = 7;
  const std::vector<double> b = ref.logits(changed);
  EXPECT_EQ(max_abs_diff(a, b, 0, 5 * V), 0.0);
  EXPECT_GT(max_abs_diff(a, b, 5 * V, 6 * V), 1e-6);
  EXPECT_GT(max_abs_diff(a, b, 7 * V, 8 * V), 1e-6);
}

TEST(DeepseekV3Reference, GroupedAndUngroupedRoutingChooseDifferently) {
  const std::string& dir = tiny(DeepseekV3Flavor::DeepseekV3);  // n_group 4, topk_group 2
  const ReferenceDeepseekV3 grouped(dir);
  const EditedConfig flat(dir, [](json& c) {
    c["n_group"] = 1;
    c["topk_group"] = 1;
  });
  const ReferenceDeepseekV3 ungrouped(flat.path());
  const ReferenceDeepseekV3::Pass g = grouped.forward(kTokens), u = ungrouped.forward(kTokens);
  ASSERT_EQ(g.routes.size(), 3u);  // layers 1-3 are MoE
  // Every grouped route keeps 2 of the 4 groups and picks only from them.
  int differ = 0, routes = 0;
  for (size_t m = 0; m < g.routes.size(); ++m)
    for (size_t t = 0; t < kTokens.size(); ++t) {
      const DsRoute& r = g.routes[m][t];
      ASSERT_EQ(r.kept_groups.size(), 2u);
      for (int e : r.experts)
        EXPECT_TRUE(e / 4 == r.kept_groups[0] || e / 4 == r.kept_groups[1]) << "expert " << e << " of a dropped group";
      // Compare the first MoE layer only: later layers see different inputs anyway.
      if (m == 0) {
        ++routes;
        std::vector<int> a = r.experts, b = u.routes[0][t].experts;
        std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
        differ += a != b;
      }
    }
  EXPECT_GT(differ, 0) << "grouping never changed a route in " << routes << " routes: the test proves nothing";
  EXPECT_GT(max_abs_diff(g.logits, u.logits, 0, g.logits.size()), 1e-6);
}

TEST(DeepseekV3Reference, BetaFastIsReadFromTheConfig) {
  // tiny: rope dim 8, theta 10^4, original 4096: beta 32/1 gives low 1, high 3;
  // beta 1/1 gives low 2, high 3, so pair 2 changes and positions past 0 move.
  const std::string& dir = tiny(DeepseekV3Flavor::DeepseekV3);
  const ReferenceDeepseekV3 v3(dir);
  const EditedConfig k2_beta(dir, [](json& c) { c["rope_scaling"]["beta_fast"] = 1; });
  const ReferenceDeepseekV3 k2(k2_beta.path());
  EXPECT_NE(v3.yarn().beta_fast, k2.yarn().beta_fast);
  const std::vector<double> a = v3.logits(kTokens), b = k2.logits(kTokens);
  const size_t V = static_cast<size_t>(v3.vocab());
  EXPECT_EQ(max_abs_diff(a, b, 0, V), 0.0) << "position 0 is not rotated";
  EXPECT_GT(max_abs_diff(a, b, V, a.size()), 1e-6);
}

// The reference reads these from config.json (a reference that hard-coded
// one would agree with a runtime making the same mistake).
TEST(DeepseekV3Reference, ConfigFieldsChangeTheLogits) {
  const std::string& dir = tiny(DeepseekV3Flavor::DeepseekV3);
  const std::vector<uint32_t> tokens(kTokens.begin(), kTokens.begin() + 4);
  const std::vector<double> base = ReferenceDeepseekV3(dir).logits(tokens);
  const std::vector<std::pair<const char*, std::function<void(json&)>>> edits = {
      // The softmax scale alone: attention_factor pinned at 1, as mscale = mscale_all_dim gives it.
      {"mscale_all_dim", [](json& c) {
         c["rope_scaling"]["mscale_all_dim"] = 0.0;
         c["rope_scaling"]["attention_factor"] = 1.0;
       }},
      {"rope factor", [](json& c) { c["rope_scaling"]["factor"] = 4; }},
      {"rope_theta", [](json& c) { c["rope_theta"] = 50000.0; }},
      {"routed_scaling_factor", [](json& c) { c["routed_scaling_factor"] = 2.827; }},
      {"norm_topk_prob", [](json& c) { c["norm_topk_prob"] = false; }},
      {"rms_norm_eps", [](json& c) { c["rms_norm_eps"] = 0.5; }},
      {"num_experts_per_tok", [](json& c) { c["num_experts_per_tok"] = 3; }},
      {"first_k_dense_replace", [](json& c) { c["first_k_dense_replace"] = 0; }},
  };
  for (const auto& [what, edit] : edits) {
    if (std::string(what) == "first_k_dense_replace") {
      // Layer 0 has no router in this checkpoint: the reference must look for one and fail.
      const EditedConfig e(dir, edit);
      EXPECT_THROW(ReferenceDeepseekV3(e.path()).logits(tokens), std::exception) << what;
      continue;
    }
    const EditedConfig e(dir, edit);
    const std::vector<double> other = ReferenceDeepseekV3(e.path()).logits(tokens);
    EXPECT_GT(max_abs_diff(base, other, 0, base.size()), 1e-9) << what << " did not change the logits";
  }
}

TEST(DeepseekV3Reference, EveryFlavourRuns) {
  // q_proj instead of q_lora; V3.1's power-of-two scales; Kimi K2 (FP8, one group); K2-Thinking (INT4 experts, BF16 rest).
  for (DeepseekV3Flavor f : {DeepseekV3Flavor::DeepseekV3QProj, DeepseekV3Flavor::DeepseekV31,
                                 DeepseekV3Flavor::KimiK2, DeepseekV3Flavor::KimiK2Thinking}) {
    const ReferenceDeepseekV3 ref(tiny(f));
    const ReferenceDeepseekV3::Pass p = ref.forward({1, 2, 300, 4});
    double sum2 = 0;
    for (double v : p.logits) {
      ASSERT_TRUE(std::isfinite(v)) << deepseek_v3_flavor_name(f);
      sum2 += v * v;
    }
    EXPECT_GT(sum2, 0.0) << deepseek_v3_flavor_name(f);
    EXPECT_EQ(ref.has_mtp(), !is_kimi_flavor(f)) << deepseek_v3_flavor_name(f);
    for (const auto& layer : p.routes)
      for (const DsRoute& r : layer) EXPECT_FALSE(r.hf_zero_fill_differs);
  }
}

TEST(DeepseekV3Reference, MtpTakesTheHiddenStateAndTheNextTokenButNotAtPositionZero) {
  const ReferenceDeepseekV3 ref(tiny(DeepseekV3Flavor::DeepseekV3));
  const ReferenceDeepseekV3::Pass main = ref.forward(kTokens);
  const size_t V = static_cast<size_t>(ref.vocab()), H = static_cast<size_t>(ref.hidden_size());
  // Row i: hidden state of position i with token i + 1 (the last one's next token made up).
  std::vector<uint32_t> next(kTokens.begin() + 1, kTokens.end());
  next.push_back(5);
  const std::vector<double> a = ref.mtp_logits(main.hidden, next);
  ASSERT_EQ(a.size(), next.size() * V);
  for (double v : a) ASSERT_TRUE(std::isfinite(v));
  // Position 0's embedding is zeroed: its token does not matter there, and does at position 1.
  std::vector<uint32_t> other = next;
  other[0] = 77, other[1] = 78;
  const std::vector<double> b = ref.mtp_logits(main.hidden, other);
  EXPECT_EQ(max_abs_diff(a, b, 0, V), 0.0);
  EXPECT_GT(max_abs_diff(a, b, V, 2 * V), 1e-6);
  // The hidden state matters at every position, position 0 included.
  std::vector<double> hidden = main.hidden;
  for (size_t i = 0; i < H; ++i) hidden[i] *= -1;
  const std::vector<double> c = ref.mtp_logits(hidden, next);
  EXPECT_GT(max_abs_diff(a, c, 0, V), 1e-6);
  // Started at position 3, rows are rotated differently and row 0 keeps its embedding.
  const std::vector<double> d = ref.mtp_logits(main.hidden, next, 3);
  EXPECT_GT(max_abs_diff(a, d, 0, V), 1e-6);
}

TEST(DeepseekV3Reference, RefusesACheckpointWithoutMtpForMtp) {
  const ReferenceDeepseekV3 ref(tiny(DeepseekV3Flavor::KimiK2));
  EXPECT_THROW(ref.mtp_logits(std::vector<double>(ref.hidden_size(), 0.0), {1}), std::exception);
}

}  // namespace
