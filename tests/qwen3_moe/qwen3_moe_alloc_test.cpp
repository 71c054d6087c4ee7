// Heap allocations of a Qwen3-MoE decode step, counted by replacing the
// global operator new (tests/support/allocation_count.h): in steady state (the fewest of eight
// steps after five warm-up ones), a step
// of a 4-layer model allocates exactly as often as a step of a 2-layer one,
// i.e. nothing per layer (no per-expert buffers, no routing maps, no route
// vectors: the backend's pool and the blocks' reused bookkeeping), with one
// thread and with a pool; and the one allocation left is the logits it
// returns. (Found by this test: std::function copies of the thread pool's
// loop bodies, per-expert Rows, the default expert source's lists,
// std::stable_sort's buffer, a buffer pool that resized slots.)
#include <gtest/gtest.h>

#include <cstdio>

#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "model/qwen3_moe/qwen3_moe_model.h"
#include "model/qwen3_moe/qwen3_moe_weights.h"
#include "support/allocation_count.h"
#include "support/test_support.h"
#include "util/thread_pool.h"

namespace deltafin {
namespace qwen3_moe_alloc_test {
namespace {

// Allocations of a steady-state one-token step (the fewest of eight) of a model with `layers` layers.
uint64_t step_allocations(const std::string& dir, int64_t layers, ThreadPool* pool) {
  Qwen3MoeGenerateOptions o;
  o.out_dir = dir;
  o.seed = 5;
  o.dims = qwen3_moe_preset("tiny");
  o.dims.layers = layers;
  o.max_position_embeddings = 64;
  generate_qwen3_moe_checkpoint(o);
  const Qwen3MoeConfig config = read_qwen3_moe_config(dir + "/config.json");
  Checkpoint checkpoint = Checkpoint::open(dir);
  const Qwen3MoeWeights weights = load_qwen3_moe_weights(config, checkpoint);
  std::unique_ptr<ResidentExpertSource> experts = load_resident_qwen3_moe_experts(config, checkpoint);
  Qwen3MoeModel model(config, weights, *experts, pool);
  std::unique_ptr<ModelSession> session = model.new_session();
  return test::decode_step_allocations(model);
}

TEST(Qwen3MoeDecode, AllocatesNothingPerLayer) {
  if (!test::counts_allocations()) GTEST_SKIP() << "allocations are counted in builds without AddressSanitizer";
  test::TempDir dir;
  for (int threads : {1, 2}) {
    std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
    const std::string at = dir.path() + "/t" + std::to_string(threads);
    const uint64_t two = step_allocations(at + "-l2", 2, pool.get());
    const uint64_t four = step_allocations(at + "-l4", 4, pool.get());
    std::printf("threads %d: a decode step allocates %llu times (2 layers) and %llu times (4 layers)\n", threads,
                static_cast<unsigned long long>(two), static_cast<unsigned long long>(four));
    EXPECT_EQ(two, four) << "threads " << threads << ": allocations grow with the layers";
    EXPECT_LE(four, 1u) << "threads " << threads << ": only the returned logits should be allocated";
  }
}

}  // namespace
}  // namespace qwen3_moe_alloc_test
}  // namespace deltafin
