// How a group of ready experts (ExpertSource::for_each_ready_group) is spread
// over the threads: whole experts, one per thread at a time, or each expert's
// products split by rows over all threads.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "util/thread_pool.h"

namespace deltafin {

// Whether a group of experts, with rows_per_expert[j] rows routed to expert
// j, is better computed one whole expert per thread (ThreadPool::
// for_each_task) than expert after expert with every product split over
// `threads`. Whole experts need one hand-off per group instead of one per
// product (two per expert), but their sizes must balance: the estimate is
// the largest-first assignment's slowest thread within 15 % of an even split, with
// an expert's cost taken as its rows plus one row's worth for reading its
// weights.
bool experts_one_per_thread(std::span<const size_t> rows_per_expert, int threads);

// Runs compute(j) for each expert of the group, in the order above decides:
// on the pool's threads, largest first, or in turn on the calling thread
// (compute then splits its products over the pool itself). Either way each
// expert's result is bit-identical (the products' reduction order does not
// depend on the split), so this changes speed only.
void compute_expert_group(ThreadPool* pool, std::span<const size_t> rows_per_expert,
                          FunctionRef<void(size_t j)> compute);

}  // namespace deltafin
