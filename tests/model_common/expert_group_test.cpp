#include "model/common/expert_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace deltafin;

// Costs are rows + 1; the largest-first assignment's slowest thread must be
// within 15 % of an even split. Worked by hand below.
TEST(ExpertGroup, OnePerThreadOnlyWhenTheExpertsBalance) {
  // Decode: 16 experts of one row on 2 threads -> 16 vs 16; on 3 threads
  // 12 + 10 + 10, 12 <= 1.15 x 10.67; on 5 threads 8 + 6 x 4, 8 > 1.15 x 6.4.
  const std::vector<size_t> decode(16, 1);
  EXPECT_TRUE(experts_one_per_thread(decode, 2));
  EXPECT_TRUE(experts_one_per_thread(decode, 3));
  EXPECT_FALSE(experts_one_per_thread(decode, 5));
  // One thread, or one expert: nothing to spread.
  EXPECT_FALSE(experts_one_per_thread(decode, 1));
  EXPECT_FALSE(experts_one_per_thread(std::vector<size_t>{40}, 2));
  // Two equal experts on two threads: 2 vs 2.
  EXPECT_TRUE(experts_one_per_thread(std::vector<size_t>{1, 1}, 2));
  // Three equal ones (cost 2) on two threads: 4 vs 2, the even split is 3 -> 4 > 3.45.
  EXPECT_FALSE(experts_one_per_thread(std::vector<size_t>{1, 1, 1}, 2));
  // 99 rows beside three of one: 100 vs 6, even split 53.
  EXPECT_FALSE(experts_one_per_thread(std::vector<size_t>{1, 99, 1, 1}, 2));
  // Prefill-like: 30,29,..,21 rows (costs 31..22) on 2 threads: largest-first
  // gives 31+28+27+24+23 = 133 and 30+29+26+25+22 = 132; even 132.5.
  std::vector<size_t> prefill;
  for (size_t r = 30; r > 20; --r) prefill.push_back(r);
  EXPECT_TRUE(experts_one_per_thread(prefill, 2));
  // 5 equal experts (cost 3) on 4 threads: 6 vs an even 3.75.
  EXPECT_FALSE(experts_one_per_thread(std::vector<size_t>{2, 2, 2, 2, 2}, 4));
}

TEST(ExpertGroup, ComputesEveryExpertOnceEitherWay) {
  ThreadPool pool(2);
  for (const std::vector<size_t>& rows : {std::vector<size_t>(16, 1), std::vector<size_t>{1, 99, 1, 1}}) {
    std::vector<std::atomic<int>> done(rows.size());
    std::mutex m;
    std::set<std::thread::id> threads;
    compute_expert_group(&pool, rows, [&](size_t j) {
      done[j]++;
      std::lock_guard<std::mutex> lock(m);
      threads.insert(std::this_thread::get_id());
    });
    for (size_t j = 0; j < rows.size(); ++j) EXPECT_EQ(done[j].load(), 1) << j;
    // Not spread: every expert ran on the calling thread (which then splits
    // its products over the pool).
    if (!experts_one_per_thread(rows, 2)) EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
  }
  std::vector<std::atomic<int>> done(3);
  compute_expert_group(nullptr, std::vector<size_t>{5, 5, 5}, [&](size_t j) { done[j]++; });
  for (auto& d : done) EXPECT_EQ(d.load(), 1);
}
