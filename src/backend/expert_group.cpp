#include "backend/expert_group.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace deltafin {

namespace {

// The order whole experts are handed to threads: most rows first, so the
// last ones taken are the smallest (largest-first keeps the threads' ends
// close together).
// Into the thread's own list, kept between calls, and by a stable insertion
// sort (groups are at most a layer's experts): a decoded token allocates
// nothing here, where std::stable_sort takes a temporary buffer each call.
std::span<const size_t> largest_first(std::span<const size_t> rows) {
  thread_local std::vector<size_t> order;
  order.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    size_t at = i;
    for (; at > 0 && rows[order[at - 1]] < rows[i]; --at) order[at] = order[at - 1];
    order[at] = i;
  }
  return order;
}

// The largest-first assignment of `order` (largest_first) to `threads`,
// within 15 % of a perfect split.
bool balanced(std::span<const size_t> rows, std::span<const size_t> order, int threads) {
  thread_local std::vector<double> load;
  load.assign(static_cast<size_t>(threads), 0.0);
  double total = 0;
  for (size_t j : order) {
    const double cost = static_cast<double>(rows[j]) + 1.0;
    *std::min_element(load.begin(), load.end()) += cost;
    total += cost;
  }
  const double slowest = *std::max_element(load.begin(), load.end());
  // The per-product hand-offs this saves cost 6.6 % of a decoding step's CPU
  // time (bench/results/2026-12-03-decode-step-2/profile), spin-waiting for
  // the slower thread included; 15 % still admits 16 experts on 3 threads
  // (6 + 5 + 5, 12.5 % over).
  return slowest <= 1.15 * total / threads;
}

}  // namespace

bool experts_one_per_thread(std::span<const size_t> rows_per_expert, int threads) {
  if (threads < 2 || rows_per_expert.size() < 2) return false;
  return balanced(rows_per_expert, largest_first(rows_per_expert), threads);
}

void compute_expert_group(ThreadPool* pool, std::span<const size_t> rows_per_expert,
                          FunctionRef<void(size_t j)> compute) {
  const int threads = pool != nullptr ? pool->size() : 1;
  if (threads >= 2 && rows_per_expert.size() >= 2) {
    // One ordering serves both the decision and the hand-out.
    const std::span<const size_t> order = largest_first(rows_per_expert);
    if (balanced(rows_per_expert, order, threads)) {
      pool->for_each_task(order.size(), [&](size_t i) { compute(order[i]); });
      return;
    }
  }
  for (size_t j = 0; j < rows_per_expert.size(); ++j) compute(j);
}

}  // namespace deltafin
