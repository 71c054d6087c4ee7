#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace deltafin;

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (size_t n : {1, 2, 3, 4, 5, 7, 64, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> calls{0};
      pool.parallel_for(n, [&](size_t begin, size_t end) {
        EXPECT_LT(begin, end);  // empty chunks are not run
        EXPECT_LE(end, n);
        calls++;
        for (size_t i = begin; i < end; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n << " i " << i;
      EXPECT_EQ(calls.load(), static_cast<int>(std::min<size_t>(n, threads)));
    }
  }
}

TEST(ThreadPool, ChunksAreContiguousAndBalanced) {
  ThreadPool pool(4);
  std::mutex m;
  std::set<std::pair<size_t, size_t>> chunks;
  pool.parallel_for(10, [&](size_t b, size_t e) {
    std::lock_guard<std::mutex> lock(m);
    chunks.insert({b, e});
  });
  // [n*i/p, n*(i+1)/p) for n = 10, p = 4.
  EXPECT_EQ(chunks, (std::set<std::pair<size_t, size_t>>{{0, 2}, {2, 5}, {5, 7}, {7, 10}}));
}

TEST(ThreadPool, SmallerNThanPool) {
  ThreadPool pool(8);
  std::atomic<int> calls{0};
  std::vector<std::atomic<int>> hits(3);
  pool.parallel_for(3, [&](size_t b, size_t e) {
    calls++;
    for (size_t i = b; i < e; ++i) hits[i]++;
  });
  EXPECT_EQ(calls.load(), 3);
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  pool.parallel_for(0, [&](size_t, size_t) { calls++; });  // n == 0: fn never runs
  EXPECT_EQ(calls.load(), 3);
}

TEST(ThreadPool, CallerTakesPartAndWorkersRunConcurrently) {
  ThreadPool pool(2);
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> caller_ran{false}, other_ran{false};
  std::atomic<int> arrived{0};
  pool.parallel_for(2, [&](size_t b, size_t) {
    (b == 0 ? caller_ran : other_ran) = true;
    if (b == 0) EXPECT_EQ(std::this_thread::get_id(), caller);
    else EXPECT_NE(std::this_thread::get_id(), caller);
    // Both chunks must be in flight at once for this barrier to open.
    arrived++;
    while (arrived.load() < 2) std::this_thread::yield();
  });
  EXPECT_TRUE(caller_ran && other_ran);
}

TEST(ThreadPool, ExceptionsPropagateAndThePoolStaysUsable) {
  ThreadPool pool(3);
  std::atomic<int> finished{0};
  EXPECT_THROW(pool.parallel_for(30,
                                 [&](size_t b, size_t) {
                                   if (b == 10) throw std::runtime_error("chunk 1 failed");
                                   finished++;
                                 }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 2);  // the other chunks still ran to completion
  try {
    pool.parallel_for(3, [&](size_t b, size_t) {
      if (b == 0) throw std::logic_error("caller chunk");
    });
    FAIL() << "no exception";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "caller chunk");
  }
  std::atomic<size_t> total{0};
  pool.parallel_for(100, [&](size_t b, size_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 100u);
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<size_t> total{0};
  pool.parallel_for(4, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) pool.parallel_for(10, [&](size_t b2, size_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 40u);
}

TEST(ThreadPool, ManyBackToBackCallsAndConcurrentCallers) {
  ThreadPool pool(2);
  std::atomic<size_t> total{0};
  for (int i = 0; i < 2000; ++i) pool.parallel_for(5, [&](size_t b, size_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 10000u);
  // Two threads sharing one pool: the calls are serialised, none is lost.
  total = 0;
  auto hammer = [&] {
    for (int i = 0; i < 300; ++i) pool.parallel_for(7, [&](size_t b, size_t e) { total += e - b; });
  };
  std::thread a(hammer), b(hammer);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2u * 300u * 7u);
}

TEST(ThreadPool, NonPositiveSizeMeansOneThread) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), 1);
  size_t seen = 0;
  pool.parallel_for(5, [&](size_t b, size_t e) { seen += e - b; });
  EXPECT_EQ(seen, 5u);
}

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (size_t n : {0, 1, 2, 3, 16, 101}) {
      std::vector<std::atomic<int>> hits(n);
      pool.for_each_task(n, [&](size_t i) {
        ASSERT_LT(i, n);
        hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n << " i " << i;
    }
  }
}

// A task that cannot finish until every other task has: with a fixed split
// the thread holding it would keep its share of the others from running and
// the wait would time out; taken as threads come free, the other thread runs
// them all. (The wait ends after 60 s either way, so a failure cannot hang.)
TEST(ThreadPool, TasksGoToWhicheverThreadIsFree) {
  ThreadPool pool(2);
  constexpr size_t n = 12;
  std::mutex m;
  std::condition_variable cv;
  size_t others_done = 0;
  bool timed_out = false;
  pool.for_each_task(n, [&](size_t i) {
    std::unique_lock<std::mutex> lock(m);
    if (i == 0) {
      timed_out = !cv.wait_for(lock, std::chrono::seconds(60), [&] { return others_done == n - 1; });
    } else {
      ++others_done;
      cv.notify_all();
    }
  });
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(others_done, n - 1);
}

TEST(ThreadPool, TaskExceptionsPropagateAndStopLaterTasks) {
  // One thread: the tasks run in order and none after the failing one.
  ThreadPool one(1);
  int ran_inline = 0;
  EXPECT_THROW(one.for_each_task(10,
                                 [&](size_t i) {
                                   ++ran_inline;
                                   if (i == 3) throw std::runtime_error("task 3 failed");
                                 }),
               std::runtime_error);
  EXPECT_EQ(ran_inline, 4);
  // Two threads: the other thread may start a few more while the failure is
  // seen, but not the ~1 s of tasks left (each sleeps 1 ms).
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  try {
    pool.for_each_task(1000, [&](size_t i) {
      ran++;
      if (i == 3) throw std::runtime_error("task 3 failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "task 3 failed");
  }
  EXPECT_LT(ran.load(), 1000);
  std::atomic<size_t> total{0};
  pool.for_each_task(50, [&](size_t) { total++; });
  EXPECT_EQ(total.load(), 50u);
}
