#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace deltafin {

namespace {

// The pool whose chunk this thread is running, so a nested parallel_for on the
// same pool runs inline instead of waiting for itself.
thread_local const ThreadPool* tls_running = nullptr;

// Spinning before blocking saves the condition-variable wake-up (tens of
// microseconds) between the back-to-back products of one decoding step; the
// limit keeps an idle pool from burning a core for long.
constexpr auto kSpinFor = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until pred() holds or kSpinFor has passed; returns pred().
template <typename Pred>
bool spin_until(Pred pred) {
  auto start = std::chrono::steady_clock::now();
  for (unsigned i = 1;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() - start > kSpinFor) return pred();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) : size_(threads < 1 ? 1 : threads) {
  errors_.resize(static_cast<size_t>(size_));
  workers_.reserve(static_cast<size_t>(size_ - 1));
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  size_t p = static_cast<size_t>(size_), i = static_cast<size_t>(index);
  size_t begin = n_ * i / p, end = n_ * (i + 1) / p;
  if (begin == end) return;
  const ThreadPool* outer = tls_running;
  tls_running = this;
  try {
    (*fn_)(begin, end);
  } catch (...) {
    errors_[i] = std::current_exception();
  }
  tls_running = outer;
}

void ThreadPool::worker_main(int index) {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
    }
    run_chunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Taking the mutex orders this notify after the caller's predicate check.
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(size_t n, FunctionRef<void(size_t, size_t)> fn) {
  if (n == 0) return;
  if (size_ == 1 || tls_running == this) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  fn_ = &fn;
  n_ = n;
  for (std::exception_ptr& e : errors_) e = nullptr;
  pending_.store(size_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();

  run_chunk(0);

  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  fn_ = nullptr;
  for (const std::exception_ptr& e : errors_) {
    if (e) std::rethrow_exception(e);
  }
}

void ThreadPool::for_each_task(size_t n, FunctionRef<void(size_t)> task) {
  std::atomic<size_t> next{0};
  parallel_for(std::min(n, static_cast<size_t>(size_)), [&](size_t, size_t) {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      try {
        task(i);
      } catch (...) {
        next.store(n, std::memory_order_relaxed);  // start nothing more
        throw;
      }
    }
  });
}

}  // namespace deltafin
