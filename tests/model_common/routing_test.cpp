// The MoE routers (model/common/routing.h) on cases worked by hand: which
// experts, in which order (descending score, ties to the lower id, NaN last:
// model/common/greedy.h's rule), with which weights; and a reused Route and
// scratch give what fresh ones give.
#include "model/common/routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace deltafin {
namespace {

const float kRouteNaN = std::numeric_limits<float>::quiet_NaN();
const float kRouteInf = std::numeric_limits<float>::infinity();

// Logits ln 1, ln 2, ln 4, ln 1: softmax 1/8, 2/8, 4/8, 1/8.
const std::vector<float> kEighths = {0.0f, std::log(2.0f), std::log(4.0f), 0.0f};

Route softmax_route(const std::vector<float>& z, size_t k, bool normalize) {
  RouteScratch scratch;
  Route r;
  route_softmax_top_k(z, k, normalize, scratch, r);
  return r;
}

Route sigmoid_route(const std::vector<float>& z, const std::vector<float>& bias, size_t k) {
  RouteScratch scratch;
  Route r;
  route_sigmoid_bias_top_k(z, bias, k, scratch, r);
  return r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void expect_weights(const Route& r, const std::vector<double>& want) {
  ASSERT_EQ(r.weights.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.weights[i], want[i], 1e-6) << "slot " << i;
}

TEST(RouteSoftmax, TakesTheHighestProbabilitiesUnnormalized) {
  const Route r = softmax_route(kEighths, 2, false);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{2, 1}));
  expect_weights(r, {0.5, 0.25});
}

TEST(RouteSoftmax, NormalizesOverTheChosen) {
  const Route r = softmax_route(kEighths, 2, true);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{2, 1}));
  expect_weights(r, {2.0 / 3.0, 1.0 / 3.0});
}

TEST(RouteSoftmax, TiesGoToTheLowerId) {
  // Experts 0 and 3 tie at 1/8: 0 comes first, 3 only when k reaches it.
  Route r = softmax_route(kEighths, 3, true);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{2, 1, 0}));
  expect_weights(r, {4.0 / 7.0, 2.0 / 7.0, 1.0 / 7.0});
  r = softmax_route(kEighths, 4, false);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{2, 1, 0, 3}));
  expect_weights(r, {0.5, 0.25, 0.125, 0.125});
  // All equal: ids in order, weights 1/k after normalizing.
  r = softmax_route(std::vector<float>(5, 0.7f), 3, true);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{0, 1, 2}));
  expect_weights(r, {1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0});
}

TEST(RouteSoftmax, ALogitOfMinusInfinityRanksBelowEveryOther) {
  // -inf has probability 0 and ranks below expert 3's tiny one.
  const std::vector<float> z = {-kRouteInf, 5.0f, 4.0f, -30.0f};
  const Route r = softmax_route(z, 4, false);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{1, 2, 3, 0}));
  const double den = std::exp(5.0) + std::exp(4.0) + std::exp(-30.0);
  expect_weights(r, {std::exp(5.0) / den, std::exp(4.0) / den, std::exp(-30.0) / den, 0.0});
  EXPECT_EQ(r.weights[3], 0.0f);
}

TEST(RouteSigmoidBias, WeightsAreTheChosenSigmoidsOverTheirSum) {
  // sigmoid(1) > sigmoid(0) > sigmoid(-1); expert 3 (-2) is not chosen.
  const Route r = sigmoid_route({0.0f, 1.0f, -1.0f, -2.0f}, std::vector<float>(4, 0.0f), 3);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{1, 0, 2}));
  const double s1 = sigmoid(1), s0 = sigmoid(0), sm1 = sigmoid(-1), den = s1 + s0 + sm1;
  expect_weights(r, {s1 / den, s0 / den, sm1 / den});
}

TEST(RouteSigmoidBias, TheBiasChoosesButDoesNotWeigh) {
  // Choice scores sigmoid(z) + bias: 0.88, 0.5, 1.5, 3.27 -> experts 3, 2;
  // weights from sigmoid(z) alone: sigmoid(-1) and sigmoid(0) over their sum.
  const Route r = sigmoid_route({2.0f, 0.0f, 0.0f, -1.0f}, {0.0f, 0.0f, 1.0f, 3.0f}, 2);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{3, 2}));
  const double a = sigmoid(-1), b = sigmoid(0);
  expect_weights(r, {a / (a + b), b / (a + b)});
}

TEST(RouteSigmoidBias, TiesGoToTheLowerId) {
  // Experts 1 and 3 tie (0.5 + 0.25 both ways), as do 0 and 2.
  const Route r = sigmoid_route({0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.25f, 0.0f, 0.25f}, 3);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{1, 3, 0}));
  expect_weights(r, {1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0});
}

TEST(RouteSigmoidBias, NaNRanksLast) {
  // A NaN logit (expert 0) or bias (expert 2) is never chosen while a
  // number is left, and the NaNs then come in id order.
  const std::vector<float> z = {kRouteNaN, 0.0f, 3.0f, -1.0f, -3.0f};
  const std::vector<float> bias = {0.0f, 0.0f, kRouteNaN, 0.0f, 0.0f};
  Route r = sigmoid_route(z, bias, 3);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{1, 3, 4}));
  const double a = sigmoid(0), b = sigmoid(-1), c = sigmoid(-3);
  expect_weights(r, {a / (a + b + c), b / (a + b + c), c / (a + b + c)});
  r = sigmoid_route(z, bias, 5);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{1, 3, 4, 0, 2}));
}

TEST(RouteSoftmax, ANaNLogitMakesEveryScoreNaNAndTheIdsDecide) {
  // softmax carries the NaN into its sum, so every probability is NaN;
  // greedy.h's rule then ranks them all equal: the lowest ids.
  const Route r = softmax_route({1.0f, kRouteNaN, 3.0f, 2.0f}, 2, true);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{0, 1}));
  for (float w : r.weights) EXPECT_TRUE(std::isnan(w));
}

std::vector<uint32_t> route_bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

// One Route and one scratch serve every position and both rules (a layer's
// routes are reused token after token): the result never carries anything
// of the call before, whatever its k, its expert count or its rule.
TEST(Routing, AReusedRouteEqualsAFreshOne) {
  RouteScratch scratch;
  Route reused;
  const std::vector<float> wide = {0.3f, -1.0f, 2.5f, 0.7f, 2.5f, -0.2f, 1.1f, 0.0f};
  const std::vector<float> narrow = {0.1f, 0.9f, -0.4f, 0.2f};
  const std::vector<float> bias = {0.05f, -0.3f, 0.2f, 0.0f};

  route_softmax_top_k(wide, 4, true, scratch, reused);
  Route fresh = softmax_route(wide, 4, true);
  EXPECT_EQ(reused.experts, (std::vector<int64_t>{2, 4, 6, 3}));  // 2.5 twice: 2 before 4
  EXPECT_EQ(reused.experts, fresh.experts);
  EXPECT_EQ(route_bits(reused.weights), route_bits(fresh.weights));

  route_sigmoid_bias_top_k(narrow, bias, 2, scratch, reused);
  fresh = sigmoid_route(narrow, bias, 2);
  // Choice: 0.575, 0.411, 0.601, 0.550 -> 2, 0.
  EXPECT_EQ(reused.experts, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(reused.experts, fresh.experts);
  EXPECT_EQ(route_bits(reused.weights), route_bits(fresh.weights));

  route_softmax_top_k(narrow, 3, false, scratch, reused);
  fresh = softmax_route(narrow, 3, false);
  EXPECT_EQ(reused.experts, (std::vector<int64_t>{1, 3, 0}));
  EXPECT_EQ(reused.experts, fresh.experts);
  EXPECT_EQ(route_bits(reused.weights), route_bits(fresh.weights));

  route_sigmoid_bias_top_k(wide, std::vector<float>(8, 0.0f), 1, scratch, reused);
  fresh = sigmoid_route(wide, std::vector<float>(8, 0.0f), 1);
  EXPECT_EQ(reused.experts, (std::vector<int64_t>{2}));
  EXPECT_EQ(reused.experts, fresh.experts);
  EXPECT_EQ(route_bits(reused.weights), route_bits(fresh.weights));
  // One chosen: sigmoid(2.5) / (sigmoid(2.5) + 1e-20), 1 within a rounding.
  EXPECT_NEAR(reused.weights[0], 1.0, 1e-7);
}

}  // namespace
}  // namespace deltafin

namespace deltafin {
namespace {

Route grouped_route(const std::vector<float>& z, const std::vector<float>& bias, GroupedRouting rule) {
  RouteScratch scratch;
  Route r;
  route_sigmoid_grouped_top_k(z, bias, rule, scratch, r);
  return r;
}

TEST(RouteGrouped, OnlyTheBestGroupsByTheirTopTwoSumAreEligible) {
  // z = 0: every score 0.5, choice = 0.5 + bias:
  //   [0.9, 0.5 | 0.8, 0.8 | 0.95, 0.0 | 0.6, 0.6]
  // group sums (top1 + top2): 1.4, 1.6, 0.95, 1.2 -> groups 1 and 0 kept.
  // Among experts 0..3 the top two are 0 (0.9) and 2 (0.8, tied with 3:
  // the lower id); expert 4 (0.95, the best overall) is in a dropped group.
  const std::vector<float> bias = {0.4f, 0.0f, 0.3f, 0.3f, 0.45f, -0.5f, 0.1f, 0.1f};
  const Route r = grouped_route(std::vector<float>(8, 0.0f), bias, {2, 4, 2, true, 2.5f});
  EXPECT_EQ(r.experts, (std::vector<int64_t>{0, 2}));
  expect_weights(r, {1.25, 1.25});  // 0.5 / (0.5 + 0.5) x 2.5
  // One group (Kimi K2's n_group = 1): the same scores choose 4 and 0.
  const Route flat = grouped_route(std::vector<float>(8, 0.0f), bias, {2, 1, 1, true, 2.5f});
  EXPECT_EQ(flat.experts, (std::vector<int64_t>{4, 0}));
}

TEST(RouteGrouped, WeightsAreTheChosenSigmoidsNormalizedThenScaled) {
  const std::vector<float> z = {1.0f, 0.0f, -1.0f, -2.0f}, none(4, 0.0f);
  const double s1 = sigmoid(1), s0 = sigmoid(0);
  const Route r = grouped_route(z, none, {2, 1, 1, true, 2.827f});
  EXPECT_EQ(r.experts, (std::vector<int64_t>{0, 1}));
  expect_weights(r, {s1 / (s1 + s0) * 2.827, s0 / (s1 + s0) * 2.827});
  const Route raw = grouped_route(z, none, {2, 1, 1, false, 2.5f});  // norm_topk_prob false
  expect_weights(raw, {s1 * 2.5, s0 * 2.5});
}

TEST(RouteGrouped, ExpertsOfDroppedGroupsAreNeverChosenEvenOverNegativeChoices) {
  // choice = 0.5 + bias = [-1.5, -1.5 | -0.4, -2.5]: group sums -3.0 and
  // -2.9, so only group 1 stays and k = 2 takes both its experts. (Hugging
  // Face's 0.0 fill would have ranked experts 0 and 1 at 0.0, above them;
  // DeepSeek's release masks with -inf: routing.h's decision.)
  const Route r = grouped_route(std::vector<float>(4, 0.0f), {-2.0f, -2.0f, -0.9f, -3.0f}, {2, 2, 1, true, 1.0f});
  EXPECT_EQ(r.experts, (std::vector<int64_t>{2, 3}));
}

TEST(RouteGrouped, RefusesGroupsThatDoNotDivideTheExperts) {
  RouteScratch scratch;
  Route r;
  EXPECT_THROW(route_sigmoid_grouped_top_k(std::vector<float>(6, 0.0f), std::vector<float>(6, 0.0f), {2, 4, 2, true, 1.0f},
                                           scratch, r),
               std::exception);
}

}  // namespace
}  // namespace deltafin
