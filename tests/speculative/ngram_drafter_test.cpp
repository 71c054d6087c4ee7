// The n-gram drafter against hand-worked histories: longest suffix (6 down
// to 2) first, the most recent earlier occurrence, never the suffix itself,
// the continuation cut to k and to the history's end.
#include <gtest/gtest.h>

#include "speculative/ngram_drafter.h"
#include "speculative/replay_drafter.h"

using namespace deltafin;

namespace {
using V = std::vector<uint32_t>;
}

TEST(NgramDrafter, ProposesWhatFollowedTheMostRecentEarlierMatch) {
  NgramDrafter d;
  // Suffix [1 2] occurs at 0 (followed by 3 4) and at 4 (followed by 9 8): the latest wins.
  EXPECT_EQ(d.propose(V{1, 2, 3, 4, 1, 2, 9, 8, 1, 2}, 3), (V{9, 8, 1}));
  // The continuation stops at the history's end.
  NgramDrafter e;
  EXPECT_EQ(e.propose(V{5, 6, 7, 5, 6}, 7), (V{7, 5, 6}));
}

TEST(NgramDrafter, PrefersTheLongestMatchingSuffix) {
  NgramDrafter d;
  // [3 1 2] (n = 3) matched at 1..3 -> 7; [1 2] alone more recently at 5..6 -> 8.
  EXPECT_EQ(d.propose(V{0, 3, 1, 2, 7, 1, 2, 8, 3, 1, 2}, 1), (V{7}));
}

TEST(NgramDrafter, NothingWithoutARepeatedBigram) {
  NgramDrafter d;
  EXPECT_TRUE(d.propose(V{1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(d.propose(V{1, 1}, 4).empty());  // too short: the only [1 1] is the suffix itself
  EXPECT_TRUE(d.propose(V{1, 2, 1, 2}, 0).empty());
}

TEST(NgramDrafter, GrowingHistoryUsesNewTokensIncrementally) {
  NgramDrafter d;
  V h{4, 5, 6};
  EXPECT_TRUE(d.propose(h, 3).empty());
  h.insert(h.end(), {4, 5});
  EXPECT_EQ(d.propose(h, 3), (V{6, 4, 5}));
  h.insert(h.end(), {9, 4, 5});
  // [4 5] now also ends at 5 (followed by 9 ...), more recent than at 2.
  EXPECT_EQ(d.propose(h, 2), (V{9, 4}));
  // A 6-gram repeat beats the shorter, more recent ones.
  NgramDrafter f;
  V g{1, 2, 3, 4, 5, 6, 70, 5, 6, 71, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(f.propose(g, 1), (V{70}));
}

TEST(ReplayDrafter, ReplaysTheRecordingAndStopsWhenTheHistoryLeavesIt) {
  ReplayDrafter d(V{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(d.propose(V{1, 2}, 3), (V{3, 4, 5}));
  EXPECT_EQ(d.propose(V{1, 2, 3, 4, 5}, 3), (V{6}));
  EXPECT_TRUE(d.propose(V{1, 2, 3, 4, 5, 6}, 3).empty());
  ReplayDrafter e(V{1, 2, 3, 4});
  EXPECT_TRUE(e.propose(V{1, 9}, 2).empty());
  EXPECT_TRUE(e.propose(V{1, 9, 3}, 2).empty());  // once off the recording, it stays silent
}
