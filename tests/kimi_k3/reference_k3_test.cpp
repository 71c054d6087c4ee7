// Tests of the float64 reference forward pass itself: its single ops against
// hand-computed values, then whole passes over generated tiny checkpoints
// (finite, activations O(1), causal, deterministic, forced routes).
#include "kimi_k3/reference_k3.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/generator.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
using namespace deltafin::test;
using ref::Vec;

// ---- Single ops, by hand ---------------------------------------------------

TEST(ReferenceOps, SigmoidAndSilu) {
  EXPECT_EQ(ref::sigmoid(0.0), 0.5);
  EXPECT_NEAR(ref::sigmoid(std::log(3.0)), 0.75, 1e-15);
  EXPECT_NEAR(ref::silu(std::log(3.0)), 0.75 * std::log(3.0), 1e-15);
  EXPECT_EQ(ref::sigmoid(-800.0), 0.0);  // exp overflows to inf: 1/(1+inf) = 0, no NaN
  EXPECT_EQ(ref::sigmoid(800.0), 1.0);
}

TEST(ReferenceOps, SituByHand) {
  // tanh(g/4)*4*sigmoid(g) * tanh(u/25)*25, values worked out separately.
  EXPECT_NEAR(ref::situ(2, 5, 4, 25), 8.033796116649688, 1e-13);
  EXPECT_NEAR(ref::situ(-1.5, 30, 4, 25), -5.44989495497961, 1e-13);
  EXPECT_NEAR(ref::situ(0.25, -7, 4, 25), -0.9576335513169089, 1e-13);
  EXPECT_EQ(ref::situ(0, 3, 4, 25), 0.0);
  EXPECT_EQ(ref::situ(3, 0, 4, 25), 0.0);
  // Saturation: the gate branch is bounded by beta, the up branch by beta_lin.
  EXPECT_NEAR(ref::situ(80, 1e4, 4, 25), 100.0, 1e-9);
  EXPECT_NEAR(ref::situ(80, -1e4, 4, 25), -100.0, 1e-9);
  EXPECT_NEAR(ref::situ(-80, 1e4, 4, 25), 0.0, 1e-30);
  // The betas are parameters, not constants.
  EXPECT_NEAR(ref::situ(80, 1e4, 2, 10), 20.0, 1e-9);
}

TEST(ReferenceOps, RmsNormWeightAfterNormalisation) {
  Vec out = ref::rms_norm({3, 4}, {1, 2}, 0.0);  // rms = sqrt(12.5)
  EXPECT_NEAR(out[0], 0.848528137423857, 1e-15);
  EXPECT_NEAR(out[1], 2.262741699796952, 1e-15);
  out = ref::rms_norm({3, 4}, {}, 1e-5);  // no weight; eps inside the root
  EXPECT_NEAR(out[0], 0.8485277980128058, 1e-15);
  out = ref::rms_norm({0, 0}, {1, 1}, 1e-5);
  EXPECT_EQ(out[0], 0.0);
}

TEST(ReferenceOps, SoftmaxAndL2Normalize) {
  Vec p = ref::softmax({0, std::log(3.0)});
  EXPECT_NEAR(p[0], 0.25, 1e-15);
  EXPECT_NEAR(p[1], 0.75, 1e-15);
  p = ref::softmax({1000, 1000, -1e300});
  EXPECT_EQ(p[0], 0.5);
  EXPECT_EQ(p[2], 0.0);

  Vec u = ref::l2_normalize({3, 4});
  EXPECT_NEAR(u[0], 0.6, 1e-16);
  EXPECT_NEAR(u[1], 0.8, 1e-16);
  u = ref::l2_normalize({0, 0});
  EXPECT_EQ(u[0], 0.0);
  u = ref::l2_normalize({1e-14, 0});  // below the 1e-12 floor: divided by the floor
  EXPECT_NEAR(u[0], 1e-2, 1e-17);
}

TEST(ReferenceOps, MixByHand) {
  // v0 = [1, 1] (rms 1), v1 = [2, 0] (rms sqrt 2); s = [1, 0]; eps = 0:
  // keys [1, 1] and [sqrt 2, 0], scores 1 and sqrt 2, alpha1 = 1/(1 + e^(1 - sqrt 2)).
  const double a0 = 0.3979022195895451, a1 = 0.6020977804104549;
  Vec out = ref::mix({{1, 1}, {2, 0}}, {1, 0}, 0.0);
  EXPECT_NEAR(out[0], a0 + 2 * a1, 1e-15);
  EXPECT_NEAR(out[1], a0, 1e-15);
  // Keys are normalised, values are not: scaling v1 keeps alpha, scales its term.
  out = ref::mix({{1, 1}, {20, 0}}, {1, 0}, 0.0);
  EXPECT_NEAR(out[0], a0 + 20 * a1, 1e-13);
  EXPECT_NEAR(out[1], a0, 1e-15);
  // One vector: alpha = 1, the vector itself.
  out = ref::mix({{0.5, -7}}, {3, 9}, 1e-5);
  EXPECT_EQ(out, (Vec{0.5, -7}));
  // s = 0: plain average.
  out = ref::mix({{1, 2}, {3, 4}, {5, 0}}, {0, 0}, 1e-5);
  EXPECT_NEAR(out[0], 3.0, 1e-15);
  EXPECT_NEAR(out[1], 2.0, 1e-15);
}

TEST(ReferenceOps, ExpertSelectionOrderTiesAndMargin) {
  ref::Selection s = ref::select_experts({0.1, 0.5, 0.3, 0.5, 0.2}, 3);
  EXPECT_EQ(s.ids, (std::vector<int>{1, 3, 2}));  // descending choice, tie 1/3 to the lower id
  EXPECT_EQ(s.margin, 0.3 - 0.2);
  s = ref::select_experts({0.5, 0.5, 0.5}, 2);
  EXPECT_EQ(s.ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.margin, 0.0);
  s = ref::select_experts({0.2, 0.9}, 2);
  EXPECT_EQ(s.ids, (std::vector<int>{1, 0}));
  EXPECT_TRUE(std::isinf(s.margin));
  EXPECT_THROW(ref::select_experts({0.2}, 2), Error);

  // Weights from the uncorrected sigma of the chosen ids, in the given order.
  Vec w = ref::route_weights({0.2, 0.6, 0.2, 0.9}, {1, 0});
  EXPECT_EQ(w, (Vec{0.6 / (0.6 + 0.2 + 1e-20), 0.2 / (0.6 + 0.2 + 1e-20)}));
  EXPECT_NEAR(w[0], 0.75, 1e-15);
  w = ref::route_weights({0.0, 0.0}, {0, 1});  // the 1e-20 keeps it finite
  EXPECT_EQ(w, (Vec{0.0, 0.0}));
}

TEST(ReferenceOps, Mxfp4DecodeByHand) {
  // One row of 64 columns: groups 0 and 1.
  uint8_t packed[32] = {};
  uint8_t scales[2] = {128, 125};  // x2 and x1/4
  packed[0] = 0x92;   // col 0: nibble 2 = 1.0; col 1: nibble 9 = -0.5
  packed[1] = 0x87;   // col 2: nibble 7 = 6; col 3: nibble 8 = -0.0
  packed[16] = 0x7F;  // col 32: nibble 15 = -6; col 33: nibble 7 = 6
  ref::Mat m = ref::decode_mxfp4(packed, scales, 1, 64);
  EXPECT_EQ(m.at(0, 0), 2.0);
  EXPECT_EQ(m.at(0, 1), -1.0);
  EXPECT_EQ(m.at(0, 2), 12.0);
  EXPECT_EQ(m.at(0, 3), 0.0);
  EXPECT_TRUE(std::signbit(m.at(0, 3)));
  EXPECT_EQ(m.at(0, 4), 0.0);
  EXPECT_EQ(m.at(0, 32), -1.5);
  EXPECT_EQ(m.at(0, 33), 1.5);
  // Scale byte 0 is 2^-127 (subnormal in fp32, exact).
  uint8_t tiny_scale[1] = {0};
  uint8_t one[16] = {0x02};
  m = ref::decode_mxfp4(one, tiny_scale, 1, 32);
  EXPECT_EQ(m.at(0, 0), std::ldexp(1.0, -127));
}

TEST(ReferenceOps, ShortConvTapOrderAndState) {
  // One channel, kernel 4, taps w = [1, 2, 3, 4]; tap 3 multiplies the current input.
  ref::Mat w{1, 4, {1, 2, 3, 4}};
  std::vector<Vec> hist(3, Vec{0.0});
  const double xs[] = {1, 10, 0, 0, 0, 0};
  const double pre[] = {4, 3 + 40, 2 + 30, 1 + 20, 10, 0};  // window sums worked by hand
  for (int t = 0; t < 6; ++t) {
    Vec y = ref::short_conv_silu(hist, w, {xs[t]});
    EXPECT_NEAR(y[0], pre[t] / (1 + std::exp(-pre[t])), 1e-13) << "t = " << t;
  }
  EXPECT_EQ(hist, (std::vector<Vec>{{0}, {0}, {0}}));
}

TEST(ReferenceOps, KdaStepByHand) {
  std::vector<double> S(4, 0.0);  // K = 2, [k, v]
  // Step 1: S = 0, k = e0, v = [2, 3], beta 0.5, no decay:
  // delta = v, S[0,:] = 0.5 * [2, 3]; read-out from the updated state.
  Vec o = ref::kda_head_step(S, {1, 0}, {1, 0}, {2, 3}, 0.5, {0, 0});
  EXPECT_EQ(o, (Vec{1, 1.5}));
  EXPECT_EQ(S, (std::vector<double>{1, 1.5, 0, 0}));
  // Step 2: decay row 0 by 1/2 first -> [0.5, 0.75]; k = e1, v = [1, 1]:
  // delta = v - S[1,:] = [1, 1]; S[1,:] = 0.5 * [1, 1]; q = [1, 1] reads rows 0 + 1.
  o = ref::kda_head_step(S, {1, 1}, {0, 1}, {1, 1}, 0.5, {std::log(0.5), 0});
  EXPECT_NEAR(o[0], 1.0, 1e-15);
  EXPECT_NEAR(o[1], 1.25, 1e-15);
  // Step 3: the prediction uses the decayed state: v equal to it gives delta = 0.
  const std::vector<double> before = S;
  o = ref::kda_head_step(S, {1, 0}, {1, 0}, {0.5, 0.75}, 1.0, {0, 0});
  EXPECT_EQ(S, before);
  EXPECT_EQ(o, (Vec{0.5, 0.75}));
}

namespace {

// A walk whose Mixes return sums (so their outputs are visible) and whose layer
// bodies return constants: the h, anchors and lists follow by hand.
struct WalkTrace {
  std::vector<std::vector<double>> attn_lists, mlp_lists, out_list;  // d = 1: one value per vector
  std::vector<double> attn_inputs, mlp_inputs, h_after;
};

double run_walk(int64_t layers, int64_t block, WalkTrace& tr) {
  auto flat = [](const std::vector<Vec>& l) {
    std::vector<double> f;
    for (const Vec& v : l) f.push_back(v[0]);
    return f;
  };
  auto sum = [](const std::vector<Vec>& l) {
    double s = 0;
    for (const Vec& v : l) s += v[0];
    return s;
  };
  ref::LayerWalk w;
  w.layers = layers;
  w.block = block;
  w.mix_attn = [&](int64_t, const std::vector<Vec>& l) { tr.attn_lists.push_back(flat(l)); return Vec{sum(l)}; };
  w.mix_mlp = [&](int64_t, const std::vector<Vec>& l) { tr.mlp_lists.push_back(flat(l)); return Vec{-sum(l)}; };
  w.mix_out = [&](const std::vector<Vec>& l) { tr.out_list.push_back(flat(l)); return Vec{sum(l)}; };
  w.attention = [&](int64_t, const Vec& x) { tr.attn_inputs.push_back(x[0]); return Vec{1}; };
  w.mlp = [&](int64_t, const Vec& x) { tr.mlp_inputs.push_back(x[0]); return Vec{10}; };
  w.after_layer = [&](int64_t, const Vec& h) { tr.h_after.push_back(h[0]); };
  return ref::layer_walk(w, {100})[0];
}

}  // namespace

TEST(ReferenceOps, LayerWalkAnchorsByHand) {
  // L = 6, B = 4, embedding 100, attention -> 1, MLP -> 10.
  WalkTrace tr;
  const double m = run_walk(6, 4, tr);
  // Layer 0 has no attention-side Mix (A is empty): its input is the embedding.
  using L = std::vector<std::vector<double>>;
  EXPECT_EQ(tr.attn_lists, (L{{100, 11}, {100, 22}, {100, 33}, {100, 44}, {100, 44, 11}}));
  EXPECT_EQ(tr.attn_inputs, (std::vector<double>{100, 111, 122, 133, 144, 155}));
  // At i mod B == 0 h is pushed and the block restarts: p = a.
  EXPECT_EQ(tr.mlp_lists, (L{{100, 1}, {100, 12}, {100, 23}, {100, 34}, {100, 44, 1}, {100, 44, 12}}));
  EXPECT_EQ(tr.mlp_inputs, (std::vector<double>{-101, -112, -123, -134, -145, -156}));
  EXPECT_EQ(tr.h_after, (std::vector<double>{11, 22, 33, 44, 11, 22}));
  EXPECT_EQ(tr.out_list, (L{{100, 44, 22}}));
  EXPECT_EQ(m, 166);
}

TEST(ReferenceOps, LayerWalkListSizesK3) {
  // K3: L = 93, B = 12 -> the tail Mix is over 9 vectors (§7.3).
  WalkTrace tr;
  run_walk(93, 12, tr);
  ASSERT_EQ(tr.attn_lists.size(), 92u);
  for (int i = 1; i < 93; ++i) EXPECT_EQ(tr.attn_lists[static_cast<size_t>(i - 1)].size(), static_cast<size_t>((i + 11) / 12 + 1)) << i;
  for (int i = 0; i < 93; ++i) EXPECT_EQ(tr.mlp_lists[static_cast<size_t>(i)].size(), static_cast<size_t>(i / 12 + 2)) << i;
  ASSERT_EQ(tr.out_list.size(), 1u);
  EXPECT_EQ(tr.out_list[0].size(), 9u);
}

// ---- Whole passes over tiny checkpoints ------------------------------------------

namespace {

const std::vector<uint32_t> kPrompt = {17, 300, 5, 767, 512, 42, 42, 99, 256, 640, 3, 511};

// One generated tiny checkpoint per seed, shared by the tests of this binary.
const K3Checkpoint& tiny(uint64_t seed) {
  struct Entry {
    std::unique_ptr<TempDir> dir;
    std::unique_ptr<K3Checkpoint> ckpt;
  };
  static std::map<uint64_t, Entry> cache;
  Entry& e = cache[seed];
  if (!e.ckpt) {
    e.dir = std::make_unique<TempDir>();
    GenerateOptions o;
    o.out_dir = e.dir->path();
    o.seed = seed;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
    e.ckpt = std::make_unique<K3Checkpoint>(load_k3_checkpoint(e.dir->path()));
  }
  return *e.ckpt;
}

const ReferenceResult& prompt_result(uint64_t seed) {
  static std::map<uint64_t, ReferenceResult> cache;
  auto it = cache.find(seed);
  if (it == cache.end()) it = cache.emplace(seed, reference_forward(tiny(seed), kPrompt)).first;
  return it->second;
}

class ReferenceTiny : public ::testing::TestWithParam<uint64_t> {};

}  // namespace

TEST_P(ReferenceTiny, FiniteLogitsAndActivationsOrderOne) {
  const K3Checkpoint& k = tiny(GetParam());
  const ReferenceResult& r = prompt_result(GetParam());
  const size_t T = kPrompt.size(), L = static_cast<size_t>(k.config.num_hidden_layers);
  ASSERT_EQ(r.logits.size(), T);
  double logit_ss = 0;
  for (const auto& row : r.logits) {
    ASSERT_EQ(row.size(), static_cast<size_t>(k.config.vocab_size));
    for (double v : row) {
      ASSERT_TRUE(std::isfinite(v));
      logit_ss += v * v;
    }
  }
  ASSERT_EQ(r.hidden_rms.size(), L);
  std::printf("seed %llu: logit rms %.4f\n", static_cast<unsigned long long>(GetParam()),
              std::sqrt(logit_ss / static_cast<double>(T * r.logits[0].size())));
  for (size_t i = 0; i < L; ++i) {
    ASSERT_EQ(r.hidden_rms[i].size(), T);
    const auto [lo, hi] = std::minmax_element(r.hidden_rms[i].begin(), r.hidden_rms[i].end());
    std::printf("  layer %zu (%s): hidden rms %.4f .. %.4f\n", i,
                k.config.layer_kinds[i] == LayerKind::KDA ? "KDA" : "MLA", *lo, *hi);
    for (size_t t = 0; t < T; ++t) {
      EXPECT_GE(r.hidden_rms[i][t], 0.05) << "layer " << i << " position " << t;
      EXPECT_LE(r.hidden_rms[i][t], 50.0) << "layer " << i << " position " << t;
    }
  }
  // Different positions see different inputs and give different logits.
  EXPECT_NE(r.logits[0], r.logits[1]);
}

TEST_P(ReferenceTiny, RoutesValidAndMarginsReported) {
  const K3Checkpoint& k = tiny(GetParam());
  const ReferenceResult& r = prompt_result(GetParam());
  const size_t T = kPrompt.size(), L = static_cast<size_t>(k.config.num_hidden_layers);
  ASSERT_EQ(r.routes.size(), L);
  ASSERT_EQ(r.route_margins.size(), L);
  EXPECT_TRUE(r.routes[0].empty());
  EXPECT_TRUE(r.route_margins[0].empty());
  double smallest = INFINITY;
  std::set<int> used;
  for (size_t i = 1; i < L; ++i) {
    ASSERT_EQ(r.routes[i].size(), T);
    ASSERT_EQ(r.route_margins[i].size(), T);
    for (size_t t = 0; t < T; ++t) {
      const std::vector<int>& ids = r.routes[i][t];
      ASSERT_EQ(ids.size(), static_cast<size_t>(k.config.num_experts_per_token));
      EXPECT_EQ(std::set<int>(ids.begin(), ids.end()).size(), ids.size()) << "repeated expert";
      for (int id : ids) {
        EXPECT_GE(id, 0);
        EXPECT_LT(id, k.config.num_experts);
        used.insert(id);
      }
      EXPECT_GE(r.route_margins[i][t], 0.0);
      EXPECT_TRUE(std::isfinite(r.route_margins[i][t]));
      smallest = std::min(smallest, r.route_margins[i][t]);
    }
  }
  std::printf("seed %llu: smallest route margin %.3g; %zu of %lld experts used\n",
              static_cast<unsigned long long>(GetParam()), smallest, used.size(),
              static_cast<long long>(k.config.num_experts));
  EXPECT_GT(used.size(), static_cast<size_t>(k.config.num_experts_per_token)) << "routing never varies";
}

TEST_P(ReferenceTiny, CausalPrefixesAgreeExactly) {
  const K3Checkpoint& k = tiny(GetParam());
  const ReferenceResult& full = prompt_result(GetParam());
  const size_t P = 7;
  const std::vector<uint32_t> prefix(kPrompt.begin(), kPrompt.begin() + P);
  const ReferenceResult r = reference_forward(k, prefix);
  ASSERT_EQ(r.logits.size(), P);
  std::vector<uint32_t> changed = kPrompt;
  for (size_t t = P; t < changed.size(); ++t) changed[t] = (changed[t] + 123) % 768;
  const ReferenceResult c = reference_forward(k, changed);
  for (size_t t = 0; t < P; ++t) {
    EXPECT_EQ(r.logits[t], full.logits[t]) << "position " << t;
    EXPECT_EQ(c.logits[t], full.logits[t]) << "position " << t;
    for (size_t i = 1; i < full.routes.size(); ++i) EXPECT_EQ(c.routes[i][t], full.routes[i][t]);
  }
  for (size_t t = P; t < kPrompt.size(); ++t) EXPECT_NE(c.logits[t], full.logits[t]) << "position " << t;
}

TEST_P(ReferenceTiny, StateCarriesThePast) {
  // Same token at position 1 after different tokens at position 0: the KDA
  // states, MLA caches and anchors differ, so the logits must.
  const K3Checkpoint& k = tiny(GetParam());
  const ReferenceResult a = reference_forward(k, {5, 42});
  const ReferenceResult b = reference_forward(k, {600, 42});
  const ReferenceResult single = reference_forward(k, {42});
  EXPECT_NE(a.logits[1], b.logits[1]);
  EXPECT_NE(a.logits[1], single.logits[0]);
  EXPECT_EQ(prompt_result(GetParam()).logits[5], reference_forward(k, {17, 300, 5, 767, 512, 42}).logits[5]);
}

TEST_P(ReferenceTiny, Deterministic) {
  const K3Checkpoint& k = tiny(GetParam());
  const ReferenceResult& first = prompt_result(GetParam());
  const ReferenceResult again = reference_forward(k, kPrompt);
  EXPECT_EQ(again.logits, first.logits);
  EXPECT_EQ(again.routes, first.routes);
  EXPECT_EQ(again.route_margins, first.route_margins);
  EXPECT_EQ(again.hidden_rms, first.hidden_rms);
  // A second generation with the same seed and a fresh load give the same bits.
  TempDir dir;
  GenerateOptions o;
  o.out_dir = dir.path();
  o.seed = GetParam();
  o.dims = preset_dims("tiny");
  o.progress = false;
  generate_k3_checkpoint(o);
  const ReferenceResult regen = reference_forward(load_k3_checkpoint(dir.path()), kPrompt);
  EXPECT_EQ(regen.logits, first.logits);
}

TEST_P(ReferenceTiny, ForcedOwnRoutesReproduce) {
  const K3Checkpoint& k = tiny(GetParam());
  const ReferenceResult& own = prompt_result(GetParam());
  ReferenceOptions opt;
  opt.forced_routes = &own.routes;
  const ReferenceResult r = reference_forward(k, kPrompt, opt);
  EXPECT_EQ(r.logits, own.logits);
  EXPECT_EQ(r.routes, own.routes);
  EXPECT_EQ(r.route_margins, own.route_margins);
}

TEST_P(ReferenceTiny, ForcedRoutesAreUsedAndChecked) {
  const K3Checkpoint& k = tiny(GetParam());
  const ReferenceResult& own = prompt_result(GetParam());
  // Swap the last selected expert of layer 1, position 0 for one not selected.
  std::vector<std::vector<std::vector<int>>> forced = own.routes;
  std::vector<int>& ids = forced[1][0];
  int other = 0;
  while (std::find(ids.begin(), ids.end(), other) != ids.end()) ++other;
  ids.back() = other;
  ReferenceOptions opt;
  opt.forced_routes = &forced;
  const ReferenceResult r = reference_forward(k, kPrompt, opt);
  EXPECT_EQ(r.routes[1][0], ids);
  EXPECT_EQ(r.route_margins[1][0], own.route_margins[1][0]);  // margins from its own scores
  EXPECT_NE(r.logits[0], own.logits[0]);

  // A reversed order is a different (decided) order: the same set, other sums.
  forced = own.routes;
  std::reverse(forced[2][3].begin(), forced[2][3].end());
  const ReferenceResult rev = reference_forward(k, kPrompt, opt);
  EXPECT_EQ(rev.routes[2][3], forced[2][3]);
  for (size_t t = 0; t < 3; ++t) EXPECT_EQ(rev.logits[t], own.logits[t]);
  for (size_t j = 0; j < own.logits[3].size(); ++j)
    EXPECT_NEAR(rev.logits[3][j], own.logits[3][j], 1e-12 * (1 + std::fabs(own.logits[3][j])));

  forced = own.routes;
  forced[1][0].pop_back();
  EXPECT_THROW(reference_forward(k, kPrompt, opt), Error);
  forced = own.routes;
  forced[1][0][0] = forced[1][0][1];
  EXPECT_THROW(reference_forward(k, kPrompt, opt), Error);
  forced = own.routes;
  forced[1][0][0] = static_cast<int>(k.config.num_experts);
  EXPECT_THROW(reference_forward(k, kPrompt, opt), Error);
  forced = own.routes;
  forced[1].pop_back();
  EXPECT_THROW(reference_forward(k, kPrompt, opt), Error);
}

TEST_P(ReferenceTiny, RejectsTokensOutsideTheVocabulary) {
  const K3Checkpoint& k = tiny(GetParam());
  EXPECT_THROW(reference_forward(k, {1, static_cast<uint32_t>(k.config.vocab_size)}), Error);
  EXPECT_TRUE(reference_forward(k, {}).logits.empty());
}

INSTANTIATE_TEST_SUITE_P(ReferenceSeeds, ReferenceTiny, ::testing::Values(1, 2, 3));

// The error study's hooks (tests/kimi_k3/margin_test.cpp): keeping the states
// changes nothing and keeps h and p of every layer and position; rounding
// them to fp32 keeps fp32 values and moves the logits, but only a little.
TEST(ReferenceStates, KeptAndRounded) {
  const K3Checkpoint& k = tiny(1);
  const ReferenceResult& plain = prompt_result(1);
  const size_t L = static_cast<size_t>(k.config.num_hidden_layers), T = kPrompt.size();
  const size_t d = static_cast<size_t>(k.config.hidden_size);
  ReferenceOptions opt;
  opt.keep_states = true;
  const ReferenceResult kept = reference_forward(k, kPrompt, opt);
  EXPECT_EQ(kept.logits, plain.logits);
  EXPECT_TRUE(plain.after_layer.empty());
  ASSERT_EQ(kept.after_layer.size(), L);
  ASSERT_EQ(kept.after_attention.size(), L);
  for (size_t i = 0; i < L; ++i) {
    ASSERT_EQ(kept.after_layer[i].size(), T);
    ASSERT_EQ(kept.after_attention[i].size(), T);
    for (size_t t = 0; t < T; ++t) {
      ASSERT_EQ(kept.after_layer[i][t].size(), d);
      double ss = 0;
      for (double v : kept.after_layer[i][t]) ss += v * v;
      EXPECT_EQ(std::sqrt(ss / static_cast<double>(d)), plain.hidden_rms[i][t]) << "layer " << i << " position " << t;
      EXPECT_NE(kept.after_attention[i][t], kept.after_layer[i][t]) << "layer " << i << " position " << t;
    }
  }

  opt.round_states = true;
  const ReferenceResult rounded = reference_forward(k, kPrompt, opt);
  for (size_t i = 0; i < L; ++i)
    for (size_t t = 0; t < T; ++t)
      for (const auto* state : {&rounded.after_layer[i][t], &rounded.after_attention[i][t]})
        for (double v : *state) ASSERT_EQ(v, static_cast<double>(static_cast<float>(v))) << "layer " << i;
  for (size_t t = 0; t < T; ++t) {
    double num = 0, den = 0;
    for (size_t j = 0; j < plain.logits[t].size(); ++j) {
      num += (rounded.logits[t][j] - plain.logits[t][j]) * (rounded.logits[t][j] - plain.logits[t][j]);
      den += plain.logits[t][j] * plain.logits[t][j];
    }
    EXPECT_GT(num, 0.0) << "position " << t;
    EXPECT_LE(std::sqrt(num / den), 1e-5) << "position " << t;
  }
}

TEST(ReferenceTinySeeds, DifferentSeedsDiffer) {
  EXPECT_NE(prompt_result(1).logits[0], prompt_result(2).logits[0]);
  EXPECT_NE(prompt_result(2).logits[0], prompt_result(3).logits[0]);
}
