#include "experts/prefetch_gate.h"

#include <gtest/gtest.h>

#include <set>

namespace deltafin {
namespace {

TEST(PrefetchGate, ReadsThatFitTheIdleWindow) {
  // 50 ms x 1 GB/s = 50,000,000 bytes = 2.85 K3 experts of 17,547,264 bytes: 2.
  EXPECT_EQ(idle_window_reads(0.050, 1e9, 17547264), 2u);
  // Exactly three experts' bytes: 3 (floor, not round).
  EXPECT_EQ(idle_window_reads(3 * 17547264 / 250e6, 250e6, 17547264), 3u);
  EXPECT_EQ(idle_window_reads(0.0699, 250e6, 17547264), 0u);  // 17.475 MB < one expert
  EXPECT_EQ(idle_window_reads(0, 1e9, 17547264), 0u);
  EXPECT_EQ(idle_window_reads(-1, 1e9, 17547264), 0u);
  EXPECT_EQ(idle_window_reads(1, 0, 17547264), 0u);
}

TEST(PrefetchGate, ExpertsInRamCostNothingAndOrderIsKept) {
  const std::vector<int64_t> pred = {5, 9, 2, 7, 3, 11};
  const std::set<int64_t> ram = {9, 7};
  auto in_ram = [&](int64_t e) { return ram.count(e) > 0; };
  size_t dropped = 99;
  // Budget 2: 5 and 2 are read, 9 and 7 are free, 3 and 11 dropped.
  EXPECT_EQ(within_read_budget(pred, 2, in_ram, &dropped), (std::vector<int64_t>{5, 9, 2, 7}));
  EXPECT_EQ(dropped, 2u);
  // Budget 0 keeps only what is in RAM.
  EXPECT_EQ(within_read_budget(pred, 0, in_ram, &dropped), (std::vector<int64_t>{9, 7}));
  EXPECT_EQ(dropped, 4u);
  // A budget above the need keeps everything.
  EXPECT_EQ(within_read_budget(pred, 10, in_ram, &dropped), pred);
  EXPECT_EQ(dropped, 0u);
}

TEST(PrefetchGate, EmaStartsAtItsFirstSample) {
  EXPECT_DOUBLE_EQ(ema_step(-1, 0.04, 0.2), 0.04);
  EXPECT_DOUBLE_EQ(ema_step(0.04, 0.09, 0.2), 0.05);  // 0.04 + 0.2 x 0.05
  EXPECT_DOUBLE_EQ(ema_step(0, 0.1, 0.5), 0.05);      // 0 is a measured window, not "none"
}

}  // namespace
}  // namespace deltafin
