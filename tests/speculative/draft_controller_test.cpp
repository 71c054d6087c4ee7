// The draft-length controller against simulated requests whose acceptance
// and timing are known, so the best k is known by hand:
//   time of a T-row step = 1 + c·(T-1); drafts right with probability p.
// E(k) = sum_{j=0..k} p^j tokens per round.
#include <gtest/gtest.h>

#include <cmath>

#include "speculative/draft_controller.h"
#include "util/rng.h"

using namespace deltafin;

namespace {

// Runs `steps` controller decisions against the simulation; returns how often each k was chosen.
std::array<int, 8> simulate(DraftController& dc, double p, double c, int steps, uint64_t seed) {
  Rng rng(seed);
  std::array<int, 8> chosen{};
  for (int i = 0; i < steps; ++i) {
    const int k = dc.next_k();
    ++chosen[static_cast<size_t>(k)];
    const double sec = 1.0 + c * k;
    if (k == 0) {
      dc.record_plain(sec);
      continue;
    }
    int accepted = 0;
    while (accepted < k && static_cast<double>(rng.next() % 1000000) / 1e6 < p) ++accepted;
    dc.record_round(k, accepted, sec);
  }
  return chosen;
}

int argmax_rate(double p, double c) {
  int best = 0;
  double best_rate = 1.0;
  for (int k = 1; k <= 7; ++k) {
    const double e = (1 - std::pow(p, k + 1)) / (1 - p);
    if (e / (1 + c * k) > best_rate) best = k, best_rate = e / (1 + c * k);
  }
  return best;
}

}  // namespace

TEST(DraftController, FixedKIsAlwaysThatK) {
  DraftController dc(7, 3);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(dc.next_k(), 3);
    dc.record_round(3, 0, 1.0);
  }
}

TEST(DraftController, StartsWithATwoDraftProbeThenAPlainStepAndGrowsWhileItPays) {
  DraftController dc;
  EXPECT_EQ(dc.next_k(), 2);
  dc.record_round(2, 2, 1.1);
  EXPECT_EQ(dc.next_k(), 0);  // the plain step it is compared with
  dc.record_plain(1.0);
  // The probe accepted all, and E(2) = 1 + 0.75 + 0.75^2 = 2.31 tokens per
  // 1.1 s beats plain's 1 per 1.0 s (p = (1 + 0.5) / (1 + 1) with the prior): grow by two.
  EXPECT_EQ(dc.next_k(), 4);
  dc.record_round(4, 4, 1.2);
  EXPECT_EQ(dc.next_k(), 6);
  dc.record_round(6, 6, 1.3);
  EXPECT_EQ(dc.next_k(), 7);
}

TEST(DraftController, DoesNotGrowWhenRoundsCostMoreThanTheyEmit) {
  // Every draft right, but a round of T rows costs T plain steps (compute-bound,
  // nothing amortised): drafting gains nothing, so it does not grow and soon stops.
  DraftController dc;
  EXPECT_EQ(dc.next_k(), 2);
  dc.record_round(2, 2, 3.3);
  EXPECT_EQ(dc.next_k(), 0);
  dc.record_plain(1.0);
  EXPECT_EQ(dc.next_k(), 0);  // E(2)/cost(2) = 2.31 / 3.3 < 1 / 1.0
}

TEST(DraftController, SettlesOnTheKWithTheMostTokensPerSecond) {
  // Cheap verification, good drafts: by hand, p = 0.8, c = 0.05 -> k = 7.
  // Costly verification: p = 0.6, c = 0.3 -> k = 1 (E/cost 1.6/1.3 = 1.23 beats k = 2's 1.96/1.6 = 1.225).
  for (auto [p, c] : {std::pair{0.8, 0.05}, std::pair{0.6, 0.3}, std::pair{0.7, 0.15}}) {
    SCOPED_TRACE("p " + std::to_string(p) + " c " + std::to_string(c));
    const int want = argmax_rate(p, c);
    DraftController dc;
    simulate(dc, p, c, 400, 3);
    auto last = simulate(dc, p, c, 200, 4);
    int most = 0;
    for (int k = 1; k < 8; ++k)
      if (last[static_cast<size_t>(k)] > last[static_cast<size_t>(most)]) most = k;
    EXPECT_NEAR(most, want, 1) << "chosen most often vs best by hand";
  }
}

TEST(DraftController, SwitchesDraftingOffWhenItDoesNotPayAndProbesNowAndThen) {
  // Drafts never right: every round costs more than a plain step and emits one token.
  DraftController dc;
  simulate(dc, 0.0, 0.3, 50, 5);
  auto later = simulate(dc, 0.0, 0.3, 160, 6);
  EXPECT_GE(later[0], 145);          // mostly plain steps
  EXPECT_GE(160 - later[0], 160 / 16 - 1);  // a probe about every 16 steps
  EXPECT_EQ(dc.best_k(), 0);
}
