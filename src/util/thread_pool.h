// A small persistent pool for data-parallel loops (matrix products split by
// output rows). The calling thread always does one share of the work, so
// ThreadPool(1) runs everything inline and ThreadPool(n) starts n - 1 workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "util/function_ref.h"

namespace deltafin {

class ThreadPool {
public:
  // threads >= 1 (values below 1 are treated as 1).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  // Splits [0, n) into size() contiguous chunks (chunk i = [n*i/p, n*(i+1)/p)),
  // runs fn(begin, end) on each non-empty one — chunk 0 on the calling thread —
  // and returns when all are done. n == 0 returns at once. The first exception
  // thrown by fn (lowest chunk) is rethrown here after every chunk has finished.
  // Calls from several threads are serialised; a call made from inside fn (a
  // nested loop) runs inline on that thread.
  void parallel_for(size_t n, FunctionRef<void(size_t begin, size_t end)> fn);

  // Runs task(i) once for each i in [0, n), each taken by whichever thread is
  // free next: for a few tasks of unequal or unpredictable cost (whole
  // experts), where parallel_for's fixed split would leave a thread idle
  // behind a slow one. After a task throws no further task starts; the first
  // exception is rethrown once the running ones have finished. Which thread
  // runs a task must not matter to its result (nested loops run inline).
  void for_each_task(size_t n, FunctionRef<void(size_t i)> task);

private:
  void worker_main(int index);
  void run_chunk(int index);

  int size_;
  std::vector<std::thread> workers_;

  std::mutex call_mutex_;  // one parallel_for at a time

  // The current job; written by the caller before generation_ is bumped.
  const FunctionRef<void(size_t, size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::vector<std::exception_ptr> errors_;

  std::mutex mutex_;
  std::condition_variable wake_;   // workers wait here for a new generation
  std::condition_variable done_;   // the caller waits here for pending_ == 0
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
};

}  // namespace deltafin
