// The CPU backend: the kernels (kernels/matmul.h, kernels/ops.h, with the
// ISA path kernels/dispatch.h chose) and a thread pool behind the Backend
// interface. Every op runs at once on the calling thread and the pool's, so
// read() never waits. Acts are std::vector<float> slots in free lists by
// size class: once a pass of a shape has run, the same pass takes every
// buffer from the lists and allocates nothing.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "util/thread_pool.h"

namespace deltafin {

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(ThreadPool* pool) : pool_(pool) {}  // pool may be null: the calling thread only
  const char* name() const override { return "cpu"; }
  ThreadPool* pool() const { return pool_; }

  void write(Act& dst, size_t row0, std::span<const float> host) override;
  void read(const Act& src, size_t row0, std::span<float> host) override;
  void copy(const Act& src, Act& dst) override;
  void copy_rows(const Act& src, size_t first, Act& dst) override;
  void place_rows(const Act& src, size_t first, Act& dst) override;
  void copy_cols(const Act& src, size_t src_col, size_t n, Act& dst, size_t dst_col) override;
  void round_bf16(const Act& src, Act& dst, size_t dst_col) override;
  void embed(const WeightView& table, std::span<const uint32_t> ids, Act& out) override;
  void matmul(const WeightView& w, const Act& x, Act& y) override;
  void gated_matmul(const WeightView& gate, const WeightView& up, const Act& x, Gate fn, Act& h) override;
  void rmsnorm(const Act& x, std::span<const float> w, float eps, Act& y) override;
  void rmsnorm_heads(Act& x, std::span<const float> w, size_t head_dim, float eps) override;
  void rope_half(Act& x, size_t head_dim, const Act& cos, const Act& sin) override;
  void rope_pairs(Act& x, size_t head_dim, const Act& cos, const Act& sin) override;
  void add(Act& x, const Act& d) override;
  void mul_sigmoid(Act& x, const Act& g) override;
  void depth_mix(std::span<const Act* const> values, std::span<const float> s, float eps, Act& out) override;
  void weighted_sum(const Act& y, std::span<const float> w, size_t k, Act& out) override;
  void gather(const Act& src, std::span<const uint32_t> rows, Act& dst) override;
  void scatter(const Act& src, std::span<const uint32_t> rows, Act& dst) override;
  void kv_store(const Act& k, const Act& v, KvLayer cache, int64_t start) override;
  bool attention_gqa(const Act& q, KvLayer cache, const GqaShape& shape, Act& out,
                     const std::function<bool()>& stop) override;
  void latent_store(const Act& ckv, std::span<const float> w, float eps, LatentLayer cache, int64_t start) override;
  bool attention_latent(const Act& q, LatentLayer cache, const MlaShape& shape, Act& u,
                        const std::function<bool()>& stop) override;
  void kda_recurrence(const Act& q, const Act& k, const Act& v, const Act& gate, const Act& r, const Act& b,
                      const KdaParams& p, KdaLayerState state, const KdaTrace* trace, Act& o) override;
  void kda_replay(const KdaParams& p, KdaLayerState state, const KdaSteps& steps, size_t rows) override;
  void run_experts(std::span<const size_t> rows_per_expert, const std::function<void(size_t j)>& compute) override;

  // Slots the pool has made so far (tests: a repeated pass adds none).
  size_t slots_made() const;

private:
  Slot acquire(size_t floats) override;
  void release(uint32_t slot) override;
  static float* data(const Act& a) { return static_cast<float*>(storage_of(a)); }

  ThreadPool* pool_;
  mutable std::mutex mutex_;  // guards the two lists, not the values
  std::vector<std::unique_ptr<std::vector<float>>> slots_;  // a slot's floats stay put while it is out
  std::vector<size_t> class_of_;                            // per slot: its size class (floats)
  std::vector<std::map<size_t, std::vector<uint32_t>>> free_;  // per thread number: size class -> free slots
};

}  // namespace deltafin
