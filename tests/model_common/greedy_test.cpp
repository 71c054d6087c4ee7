// The one NaN rule of model/common/greedy.h, checked against hand-worked
// expectations: NaN ranks below every number, ties go to the lower index.
#include "model/common/greedy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace deltafin {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(Greedy, ArgmaxTakesTheLowestIndexOnTies) {
  const std::vector<float> x = {1.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(argmax_first(x.data(), x.size()), 1u);
}

TEST(Greedy, ArgmaxNeverChoosesNaNWhileANumberIsLeft) {
  // A NaN first used to win (every comparison with it is false).
  const std::vector<float> x = {kNaN, -5.0f, kNaN, -kInf};
  EXPECT_EQ(argmax_first(x.data(), x.size()), 1u);
  const std::vector<float> y = {-kInf, kNaN};
  EXPECT_EQ(argmax_first(y.data(), y.size()), 0u);
}

TEST(Greedy, ArgmaxOfAllNaNIsZero) {
  const std::vector<float> x = {kNaN, kNaN, kNaN};
  EXPECT_EQ(argmax_first(x.data(), x.size()), 0u);
}

TEST(Greedy, TopKRanksDescendingWithTiesToTheLowerIndex) {
  const std::vector<float> x = {0.5f, 0.9f, 0.5f, 0.1f, 0.9f};
  EXPECT_EQ(top_k_experts(x.data(), x.size(), 4), (std::vector<int64_t>{1, 4, 0, 2}));
}

TEST(Greedy, TopKPutsNaNsLastInIndexOrder) {
  const std::vector<float> x = {kNaN, 0.2f, kNaN, -1.0f, 0.7f};
  EXPECT_EQ(top_k_experts(x.data(), x.size(), 5), (std::vector<int64_t>{4, 1, 3, 0, 2}));
  EXPECT_EQ(top_k_experts(x.data(), x.size(), 2), (std::vector<int64_t>{4, 1}));
}

TEST(Greedy, SignedZerosTie) {
  // -0 == +0 as numbers: a tie, so the lower index.
  const std::vector<float> x = {-0.0f, 0.0f};
  EXPECT_EQ(argmax_first(x.data(), x.size()), 0u);
  const std::vector<float> y = {0.0f, -0.0f};
  EXPECT_EQ(top_k_experts(y.data(), y.size(), 1), (std::vector<int64_t>{0}));
}

// A pass keeps every row's route of every MoE layer: the chosen ids must not
// carry the n-slot ranking buffer with them (K3: 896 slots where 16 are used).
TEST(Greedy, TopKKeepsOnlyKSlots) {
  std::vector<float> scores(896);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>((i * 37) % 101);
  const std::vector<int64_t> top = top_k_experts(scores.data(), scores.size(), 16);
  EXPECT_EQ(top.size(), 16u);
  EXPECT_LE(top.capacity(), 16u);
}

}  // namespace
}  // namespace deltafin

