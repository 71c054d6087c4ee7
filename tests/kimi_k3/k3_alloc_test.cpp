// Heap allocations of a Kimi K3 decode step, counted by replacing the
// global operator new (tests/support/allocation_count.h): in steady state (the fewest of eight
// steps after five warm-up ones), a step
// of an 8-layer model allocates exactly as often as a step of a 4-layer one,
// i.e. nothing per layer (no per-expert buffers, no routing maps, no route
// vectors, Mix lists: the backend's pool and reused bookkeeping), with one
// thread and with a pool; and the one allocation left is the logits it
// returns. (Found by this test: std::function copies of the thread pool's
// loop bodies, per-expert Rows, the default expert source's lists,
// std::stable_sort's buffer, a buffer pool that resized slots.)
#include <gtest/gtest.h>

#include <cstdio>

#include "model/common/make_checkpoint.h"
#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/model.h"
#include "model/kimi_k3/weights.h"
#include "support/allocation_count.h"
#include "support/test_support.h"
#include "util/thread_pool.h"

namespace deltafin {
namespace k3_alloc_test {
namespace {

// Allocations of a steady-state one-token step (the fewest of eight) of a model with `layers` layers.
uint64_t step_allocations(const std::string& dir, int64_t layers, ThreadPool* pool) {
  MakeCheckpointRequest r;
  r.out = dir;
  r.seed = 5;
  r.progress = false;
  r.dims.layers = layers;  // MLA every 4th layer and the last, KDA between
  make_k3_checkpoint(r);
  const K3Checkpoint checkpoint = load_k3_checkpoint(dir);
  const K3Weights weights = load_k3_weights(checkpoint);
  std::unique_ptr<ResidentExpertSource> experts = load_resident_k3_experts(checkpoint);
  K3Model model(checkpoint.config, weights, *experts, pool);
  std::unique_ptr<ModelSession> session = model.new_session();
  return test::decode_step_allocations(model);
}

TEST(K3Decode, AllocatesNothingPerLayer) {
  if (!test::counts_allocations()) GTEST_SKIP() << "allocations are counted in builds without AddressSanitizer";
  test::TempDir dir;
  for (int threads : {1, 2}) {
    std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
    const std::string at = dir.path() + "/t" + std::to_string(threads);
    const uint64_t two = step_allocations(at + "-l4", 4, pool.get());
    const uint64_t four = step_allocations(at + "-l8", 8, pool.get());
    std::printf("threads %d: a decode step allocates %llu times (4 layers) and %llu times (8 layers)\n", threads,
                static_cast<unsigned long long>(two), static_cast<unsigned long long>(four));
    EXPECT_EQ(two, four) << "threads " << threads << ": allocations grow with the layers";
    EXPECT_LE(four, 1u) << "threads " << threads << ": only the returned logits should be allocated";
  }
}

}  // namespace
}  // namespace k3_alloc_test
}  // namespace deltafin
