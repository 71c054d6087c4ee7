// Route lookahead (k3-model.md §11): what PILOT predicts, the multi-row union
// rule, and the auto gate's decisions, driven with fabricated recalls.
#include "model/kimi_k3/lookahead.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "model/kimi_k3/load/loaded_k3.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/kimi_k3/generator.h"
#include "support/test_support.h"
#include "util/rng.h"

using namespace deltafin;

namespace {

struct SmallModel {
  test::TempDir dir;
  std::unique_ptr<LoadedK3> m;
  SmallModel() {
    GenerateOptions o;
    o.out_dir = dir.path();
    o.seed = 5;
    o.dims = preset_dims("small");  // 64 experts, top 16
    o.progress = false;
    generate_k3_checkpoint(o);
    m = load_k3_resident(dir.path(), 1);
  }
};

SmallModel& small() {
  static SmallModel s;
  return s;
}

Rows random_rows(size_t T, size_t d, uint64_t seed) {
  Rows r(T, d);
  Rng rng(seed);
  for (float& v : r.v) v = static_cast<float>(rng.uniform() * 2 - 1);
  return r;
}

// The §7.7 route of one row (descending choice), computed here from the
// definitions with the weight decode of weight_at (independent of the kernels).
std::vector<int64_t> route_by_definition(const LoadedK3& m, int64_t layer, const float* x) {
  const LayerWeights& lw = m.weights.layers[static_cast<size_t>(layer)];
  const size_t d = static_cast<size_t>(m.config.hidden_size), E = static_cast<size_t>(m.config.num_experts);
  double ss = 0;
  for (size_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / d + m.config.rms_norm_eps);
  std::vector<std::pair<double, int64_t>> score;
  for (size_t e = 0; e < E; ++e) {
    double z = 0;
    for (size_t i = 0; i < d; ++i) z += weight_at(lw.moe.router.view(), e, i) * (x[i] * inv * lw.post_attention_norm[i]);
    score.push_back({1.0 / (1.0 + std::exp(-z)) + lw.moe.correction_bias[e], static_cast<int64_t>(e)});
  }
  std::sort(score.begin(), score.end(), [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::vector<int64_t> top;
  for (size_t i = 0; i < static_cast<size_t>(m.config.num_experts_per_token); ++i) top.push_back(score[i].second);
  return top;  // descending choice score, ties to the lower id
}

std::vector<Route> as_routes(const std::vector<int64_t>& experts) {
  Route r;
  r.experts = experts;
  r.weights.assign(experts.size(), 1.0f / experts.size());
  return {r};
}

// A route of 16 experts none of which is in `avoid`.
std::vector<int64_t> disjoint_from(const std::vector<int64_t>& avoid, size_t k, size_t E) {
  std::vector<int64_t> out;
  for (size_t e = 0; e < E && out.size() < k; ++e)
    if (std::find(avoid.begin(), avoid.end(), static_cast<int64_t>(e)) == avoid.end()) out.push_back(static_cast<int64_t>(e));
  return out;
}

}  // namespace

TEST(Lookahead, PilotIsTheNextLayersRouterOnThisLayersMixOutput) {
  LoadedK3& m = *small().m;
  RouteLookahead la(m.config, m.weights, LookaheadMode::On, nullptr);
  const size_t d = static_cast<size_t>(m.config.hidden_size);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Rows x = random_rows(1, d, seed);
    std::vector<int64_t> got = la.plan(3, x);
    // One row: the route's experts, most confident first.
    std::vector<int64_t> want = route_by_definition(m, 3, x.row(0));
    EXPECT_EQ(got.front(), want.front()) << seed;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << seed;
  }
}

TEST(Lookahead, SeveralRowsGiveTheUnionCappedAt32InAscendingOrder) {
  LoadedK3& m = *small().m;
  RouteLookahead la(m.config, m.weights, LookaheadMode::On, nullptr);
  const size_t d = static_cast<size_t>(m.config.hidden_size);
  Rows x = random_rows(2, d, 11);
  std::set<int64_t> uni;
  for (size_t t = 0; t < 2; ++t) {
    std::vector<int64_t> r = route_by_definition(m, 2, x.row(t));
    uni.insert(r.begin(), r.end());
  }
  std::vector<int64_t> got = la.plan(2, x);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(got.size(), std::min<size_t>(uni.size(), 32));
  for (int64_t e : got) EXPECT_TRUE(uni.count(e)) << e;
  // Eight rows: the union of 8 x 16 of 64 experts exceeds 32, so it is capped.
  Rows many = random_rows(8, d, 12);
  std::vector<int64_t> capped = la.plan(2, many);
  EXPECT_EQ(capped.size(), 32u);
  EXPECT_TRUE(std::is_sorted(capped.begin(), capped.end()));
}

TEST(Lookahead, OffPredictsNothingAndOnAlwaysPrefetches) {
  LoadedK3& m = *small().m;
  const size_t d = static_cast<size_t>(m.config.hidden_size), E = static_cast<size_t>(m.config.num_experts);
  RouteLookahead off(m.config, m.weights, LookaheadMode::Off, nullptr);
  EXPECT_TRUE(off.plan(2, random_rows(1, d, 1)).empty());
  EXPECT_TRUE(off.plan_first_layer().empty());
  RouteLookahead on(m.config, m.weights, LookaheadMode::On, nullptr);
  for (int i = 0; i < 40; ++i) {  // recall 0 every time: "on" keeps speculating
    std::vector<int64_t> p = on.plan(2, random_rows(1, d, 100 + i));
    ASSERT_EQ(p.size(), 16u);
    on.observe(2, as_routes(disjoint_from(p, 16, E)));
  }
  EXPECT_EQ(on.counters().pilot_hits, 0u);
  EXPECT_EQ(on.counters().actual, 40u * 16);
  EXPECT_EQ(on.counters().suppressed_layers, 0u);
}

TEST(Lookahead, AutoGateSuppressesAfter16PoorSamplesAndResumes) {
  LoadedK3& m = *small().m;
  const size_t d = static_cast<size_t>(m.config.hidden_size), E = static_cast<size_t>(m.config.num_experts);
  RouteLookahead la(m.config, m.weights, LookaheadMode::Auto, nullptr);
  // 16 samples where the actual route shares nothing with PILOT's prediction
  // nor with the previous pass's route: both EMAs stay 0 < 0.10.
  std::vector<int64_t> last;
  for (int i = 0; i < 16; ++i) {
    std::vector<int64_t> p = la.plan(2, random_rows(1, d, 200 + i));
    EXPECT_EQ(p.size(), 16u) << "speculates until 16 samples, sample " << i;
    std::vector<int64_t> avoid = p;
    avoid.insert(avoid.end(), last.begin(), last.end());
    last = disjoint_from(avoid, 16, E);
    la.observe(2, as_routes(last));
  }
  Rows x = random_rows(1, d, 999);
  EXPECT_TRUE(la.plan(2, x).empty()) << "suppressed";
  EXPECT_EQ(la.counters().suppressed_layers, 1u);
  // Scoring continues: perfect recall brings the EMA back above 0.10
  // (0.2 after one sample of 1.0 from 0), so the next plan speculates again.
  la.observe(2, as_routes(route_by_definition(m, 2, x.row(0))));
  EXPECT_EQ(la.plan(2, random_rows(1, d, 1000)).size(), 16u);
}

TEST(Lookahead, AutoGatePicksThePreviousTokenPredictorWhenItIsBetter) {
  LoadedK3& m = *small().m;
  const size_t d = static_cast<size_t>(m.config.hidden_size), E = static_cast<size_t>(m.config.num_experts);
  RouteLookahead la(m.config, m.weights, LookaheadMode::Auto, nullptr);
  // Every pass routes layer 2 to the same fixed set that PILOT never predicts
  // on these inputs, so previous-token recall is 1 and PILOT's is low.
  std::vector<int64_t> fixed;
  for (int i = 0; i < 18; ++i) {
    std::vector<int64_t> p = la.plan(2, random_rows(1, d, 300 + i));
    if (fixed.empty()) fixed = disjoint_from(p, 16, E);
    la.observe(2, as_routes(fixed));
  }
  EXPECT_EQ(la.plan(2, random_rows(1, d, 400)), fixed);
  EXPECT_NE(la.describe_gates().find("layer 2: pilot"), std::string::npos);
  // Layer 1 has no PILOT: the previous token's route is its prediction.
  la.observe(1, as_routes(fixed));
  EXPECT_EQ(la.plan_first_layer(), fixed);
}

TEST(Lookahead, ModeNamesParse) {
  EXPECT_EQ(parse_lookahead_mode("auto"), LookaheadMode::Auto);
  EXPECT_EQ(parse_lookahead_mode("on"), LookaheadMode::On);
  EXPECT_EQ(parse_lookahead_mode("off"), LookaheadMode::Off);
  EXPECT_FAILS_WITH(parse_lookahead_mode("sometimes"), "not one of on, off, auto");
}
