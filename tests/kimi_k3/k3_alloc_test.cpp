// Heap allocations of a Kimi K3 decode step, counted by replacing the
// global operator new in this test binary: after five warm-up steps, a step
// of an 8-layer model allocates exactly as often as a step of a 4-layer one,
// i.e. nothing per layer (no per-expert buffers, no routing maps, no route
// vectors, Mix lists: the backend's pool and reused bookkeeping), with one
// thread and with a pool; and the one allocation left is the logits it
// returns. (Found by this test: std::function copies of the thread pool's
// loop bodies, per-expert Rows, the default expert source's lists,
// std::stable_sort's buffer, a buffer pool that resized slots.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "model/common/make_checkpoint.h"
#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/model.h"
#include "model/kimi_k3/weights.h"
#include "support/test_support.h"
#include "util/thread_pool.h"

// Not under AddressSanitizer, whose own operator new checks every new
// against its delete: the count is the release build's.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DELTAFIN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DELTAFIN_ASAN 1
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
}  // namespace

#ifndef DELTAFIN_ASAN
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace deltafin {
namespace k3_alloc_test {
namespace {

// Allocations of the sixth one-token step of a model with `layers` layers.
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
  session->plan_length(16);  // the session's rows are allocated once, as the engine does
  // Five warm-up steps: the attention scratch grows geometrically with the
  // context (to 8 positions at the fifth), so the sixth needs no more.
  const uint32_t tokens[] = {3, 5, 7, 11, 13, 17};
  for (size_t t = 0; t < 5; ++t) model.forward(*session, std::span(tokens + t, 1), false);
  g_allocations = 0;
  g_counting = true;
  Rows logits = model.forward(*session, std::span(tokens + 5, 1), false);
  g_counting = false;
  EXPECT_EQ(logits.T, 1u);
  return g_allocations.load();
}

TEST(K3Decode, AllocatesNothingPerLayer) {
#ifdef DELTAFIN_ASAN
  GTEST_SKIP() << "allocations are counted in builds without AddressSanitizer";
#endif
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
