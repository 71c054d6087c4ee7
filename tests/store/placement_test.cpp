// Placement: proportional to bandwidth, equal drives interleaved and rotated,
// probe noise ignored, replicas on the least-loaded other drive.
#include "store/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/test_support.h"

using namespace deltafin;

namespace {

PlacementInput input(int64_t layers, int64_t experts, std::vector<double> bw) {
  PlacementInput in;
  in.layers = layers;
  in.experts = experts;
  for (int64_t l = 1; l < layers; ++l) in.moe_layers.push_back(l);
  in.drive_bytes_per_s = std::move(bw);
  return in;
}

// counts[layer][drive], primary copies only.
std::vector<std::vector<int64_t>> counts(const std::vector<std::vector<uint16_t>>& p, int64_t layers, int64_t experts,
                                         size_t drives) {
  std::vector<std::vector<int64_t>> c(layers, std::vector<int64_t>(drives, 0));
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t e = 0; e < experts; ++e) {
      const auto& d = p[l * experts + e];
      if (!d.empty()) ++c[l][d[0]];
    }
  return c;
}

}  // namespace

TEST(Placement, EqualDrivesBalancedInterleavedAndRotated) {
  const int64_t L = 10, E = 16;
  auto p = place_experts(input(L, E, {2e9, 2e9, 2e9}));
  ASSERT_EQ(p.size(), size_t(L * E));
  for (int64_t e = 0; e < E; ++e) EXPECT_TRUE(p[e].empty()) << "layer 0 is dense";
  auto c = counts(p, L, E, 3);
  std::vector<int64_t> total(3, 0), extra(3, 0);
  for (int64_t l = 1; l < L; ++l) {
    auto [lo, hi] = std::minmax_element(c[l].begin(), c[l].end());
    EXPECT_LE(*hi - *lo, 1) << "layer " << l;
    for (int d = 0; d < 3; ++d) {
      total[d] += c[l][d];
      extra[d] += c[l][d] == 6;  // 16 = 5 + 5 + 5 + 1: who took the remainder
    }
    for (int64_t e = 0; e < E; ++e) {
      ASSERT_EQ(p[l * E + e].size(), 1u);
      if (e + 1 < E) {
        EXPECT_NE(p[l * E + e][0], p[l * E + e + 1][0]) << "layer " << l << " expert " << e;
      }
    }
  }
  // 9 layers x 1 remainder: each drive takes it 3 times.
  EXPECT_EQ(extra, (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(total, (std::vector<int64_t>{48, 48, 48}));
  // Expert 0 is not always on the same drive.
  std::set<uint16_t> first;
  for (int64_t l = 1; l < L; ++l) first.insert(p[l * E][0]);
  EXPECT_EQ(first.size(), 3u);
}

TEST(Placement, TwoEqualDrivesAlternate) {
  auto p = place_experts(input(3, 7, {1e9, 1e9}));
  for (int64_t l = 1; l < 3; ++l)
    for (int64_t e = 0; e + 1 < 7; ++e) EXPECT_NE(p[l * 7 + e][0], p[l * 7 + e + 1][0]);
  auto c = counts(p, 3, 7, 2);
  EXPECT_EQ(c[1][0] + c[2][0], 7);  // 4+3 then 3+4: the odd one goes round
}

TEST(Placement, ProportionalToBandwidth) {
  const int64_t L = 10, E = 16;
  auto p = place_experts(input(L, E, {1e9, 3e9}));
  auto c = counts(p, L, E, 2);
  for (int64_t l = 1; l < L; ++l) EXPECT_EQ(c[l], (std::vector<int64_t>{4, 12})) << "layer " << l;

  // 1:2 with 16 experts: 5.33 and 10.67 per layer; 5 or 6 and 10 or 11, and
  // over 9 layers within one file of the ideal 48 / 96.
  p = place_experts(input(L, E, {1e9, 2e9}));
  c = counts(p, L, E, 2);
  int64_t t0 = 0;
  for (int64_t l = 1; l < L; ++l) {
    EXPECT_TRUE(c[l][0] == 5 || c[l][0] == 6) << c[l][0];
    t0 += c[l][0];
  }
  EXPECT_EQ(t0, 48);
}

TEST(Placement, ProbeNoiseWithin15PercentCountsAsEqual) {
  auto equal = place_experts(input(10, 16, {2e9, 2e9, 2e9}));
  auto noisy = place_experts(input(10, 16, {2.0e9, 2.25e9, 2.1e9}));
  EXPECT_EQ(noisy, equal);
  auto w = placement_weights({1000, 1149, 2000});
  EXPECT_EQ(w[0], 1074.5);
  EXPECT_EQ(w[1], 1074.5);
  EXPECT_EQ(w[2], 2000);
  // Grouping is against the group's slowest drive, so it cannot chain upward.
  w = placement_weights({1200, 1000, 1100});
  EXPECT_EQ(w[1], 1050);
  EXPECT_EQ(w[2], 1050);
  EXPECT_EQ(w[0], 1200);
}

// The whole placement of a small store, worked by hand from placement.cpp's
// rules, so any change to a rule (the shares, the remainder's order, the
// interleave, the replica choice) shows here.
//
// 3 layers (layer 0 dense), 7 experts, drives {1, 2, 1} GB/s. Drives 0 and 2
// are equal and drive 1 is 2x (outside 15 %), so the weights are
// {1/4, 1/2, 1/4} and each layer's ideal shares {1.75, 3.5, 1.75} (all exact
// in binary).
//
// Layer 1 (k = 0): floors {1, 3, 1} give 5; debts (ideal so far minus
// assigned + floor) {0.75, 0.5, 0.75}; drives 0 and 2 tie and go in rotated
// order (k = 0: drive 0 first), so the two left over go to drives 0 and 2:
// counts {2, 3, 2}. Interleave (each id: every drive earns its count, the
// richest takes the id and pays 7; ties in rotated order 0, 1, 2):
//   credits before each pick        pick
//   e0 {2, 3, 2}                    1
//   e1 {4, -1, 4}                   0 (tie with 2)
//   e2 {-1, 2, 6}                   2
//   e3 {1, 5, 1}                    1
//   e4 {3, 1, 3}                    0 (tie with 2)
//   e5 {-2, 4, 5}                   2
//   e6 {0, 7, 0}                    1
// Layer 2 (k = 1): ideal so far {3.5, 7, 3.5}, floors {1, 3, 1}, assigned
// {2, 3, 2}, so debts {0.5, 1, 0.5}: drive 1 first, then the tie of 0 and 2
// in rotated order for k = 1 (1, 2, 0), so drive 2: counts {1, 4, 2}.
// Interleave, ties in order 1, 2, 0:
//   e0 {1, 4, 2} -> 1    e1 {2, 1, 4} -> 2    e2 {3, 5, -1} -> 1
//   e3 {4, 2, 1} -> 0    e4 {-2, 6, 3} -> 1   e5 {-1, 3, 5} -> 2
//   e6 {0, 7, 0} -> 1
// Replicas, in the order asked: (1, 3) sits on drive 1; drives 0 and 2 both
// hold 2 files of layer 1 (8 per unit weight), a tie broken by the whole
// store's files per weight (3 / 0.25 = 12 against 4 / 0.25 = 16): drive 0.
// (2, 3) sits on drive 0; drive 1 holds 4 of layer 2 (4 / 0.5 = 8) and drive
// 2 holds 2 (2 / 0.25 = 8): tied, and by the store drive 1 (7 / 0.5 = 14)
// beats drive 2 (4 / 0.25 = 16).
TEST(Placement, ASmallStoreWorkedByHand) {
  PlacementInput in = input(3, 7, {1e9, 2e9, 1e9});
  in.replicate = {{1, 3}, {2, 3}};
  using D = std::vector<uint16_t>;
  const std::vector<D> expected = {
      {},  {},  {},  {},     {},  {},  {},   // layer 0: dense
      {1}, {0}, {2}, {1, 0}, {0}, {2}, {1},  // layer 1
      {1}, {2}, {1}, {0, 1}, {1}, {2}, {1},  // layer 2
  };
  EXPECT_EQ(place_experts(in), expected);
}

TEST(Placement, ReplicasGoToTheLeastLoadedOtherDrive) {
  auto in = input(4, 8, {1e9, 1e9, 1e9});
  auto base = place_experts(in);
  in.replicate = {{1, 0}, {1, 1}, {1, 2}, {2, 5}};
  auto p = place_experts(in);
  for (int64_t i = 0; i < 4 * 8; ++i) {
    const bool hot = i == 8 || i == 9 || i == 10 || i == 21;
    ASSERT_EQ(p[i].size(), base[i].size() + (hot ? 1 : 0)) << i;
    if (!base[i].empty()) {
      EXPECT_EQ(p[i][0], base[i][0]) << "primary unchanged";
    }
    if (hot) {
      EXPECT_NE(p[i][1], p[i][0]);
    }
  }
  // Layer 1 of 8 experts over 3 drives: 3/3/2 before; each replica lands on
  // the drive with the fewest files in that layer at the time.
  auto c = counts(base, 4, 8, 3)[1];
  std::vector<int64_t> files = c;
  for (int64_t e : {0, 1, 2}) {
    const uint16_t got = p[8 + e][1];
    for (size_t d = 0; d < 3; ++d)
      if (d != p[8 + e][0]) {
        EXPECT_LE(files[got], files[d]);
      }
    ++files[got];
  }
}

TEST(Placement, Errors) {
  auto in = input(4, 8, {1e9});
  in.replicate = {{1, 0}};
  EXPECT_FAILS_WITH(place_experts(in), "two drives");
  in = input(4, 8, {1e9, 1e9});
  in.replicate = {{0, 0}};
  EXPECT_FAILS_WITH(place_experts(in), "layer 0", "not a routed expert");
  in.replicate = {{1, 1}, {1, 1}};
  EXPECT_FAILS_WITH(place_experts(in), "twice");
  EXPECT_FAILS_WITH(place_experts(input(4, 8, {1e9, 0})), "drive 1");
  EXPECT_FAILS_WITH(place_experts(input(4, 8, {})), "no drives");
}

// Layer 1 of 6 experts on two equal drives, heat 10 8 1 6 0 5 (sum 30).
// Hottest first, each to the drive with the least heat that has room (3 each):
//   e0 10 -> d0 (tie: more room equal, rotated order starts at d0 in the first MoE layer)
//   e1  8 -> d1 (0 < 10)         e3 6 -> d1 (14 < 16)     e5 5 -> d0 (15 < 19)
//   e2  1 -> d1 (15 < 16)        e4 0 -> d0 (d1 is full)
// so each drive carries 15 of 30, where interleaving ids (0 1 0 1 0 1) gives 11 and 19.
TEST(Placement, HeatSpreadsTheHottestExpertsWorkedByHand) {
  PlacementInput in = input(2, 6, {1e9, 1e9});
  EXPECT_EQ(place_experts(in)[6 + 5], std::vector<uint16_t>{1}) << "without heat, ids alternate";
  in.heat = {0, 0, 0, 0, 0, 0, 10, 8, 1, 6, 0, 5};
  using D = std::vector<uint16_t>;
  const std::vector<D> expected = {{}, {}, {}, {}, {}, {}, {0}, {1}, {1}, {1}, {0}, {0}};
  EXPECT_EQ(place_experts(in), expected);
  // A layer with no heat is interleaved as before.
  PlacementInput cold = input(3, 6, {1e9, 1e9});
  cold.heat.assign(18, 0.0);
  for (int64_t e = 0; e < 6; ++e) cold.heat[static_cast<size_t>(12 + e)] = 1.0 + static_cast<double>(e);
  PlacementInput plain = input(3, 6, {1e9, 1e9});
  auto with = place_experts(cold), without = place_experts(plain);
  for (int64_t e = 0; e < 6; ++e) EXPECT_EQ(with[6 + e], without[6 + e]) << "layer 1 expert " << e;
}

// The replica of a hot expert goes to the drive with the least heat, not the fewest files.
// Three equal drives, layer 1 of 6 experts kept on drives 0 0 1 1 2 2 with heat
// 9 0 4 0 1 0: drive loads 9 / 4 / 1. Replicating e0 (9): drives 1 and 2 are the
// other ones; d2 carries least (1 < 4), so e0's copy goes there, and loads become
// 4.5 / 4 / 5.5. Then e2 (4): d0 (4.5) beats d2 (5.5).
TEST(Placement, ReplicasFollowHeatAndPrimariesAreKept) {
  PlacementInput in = input(2, 6, {1e9, 1e9, 1e9});
  in.keep_primaries = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2};
  in.heat = {0, 0, 0, 0, 0, 0, 9, 0, 4, 0, 1, 0};
  in.replicate = {{1, 0}, {1, 2}};
  auto p = place_experts(in);
  EXPECT_EQ(p[6 + 0], (std::vector<uint16_t>{0, 2}));
  EXPECT_EQ(p[6 + 2], (std::vector<uint16_t>{1, 0}));
  for (int64_t e : {1, 3, 4, 5}) EXPECT_EQ(p[6 + e][0], in.keep_primaries[6 + e]) << e;
  in.keep_primaries[7] = 3;
  EXPECT_THROW(place_experts(in), std::exception) << "drive 3 of 3";
}
