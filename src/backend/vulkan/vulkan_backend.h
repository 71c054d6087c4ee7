// The Vulkan backend: every op of backend.h as a GLSL compute shader
// (shaders/), with the CPU's bits (docs/vulkan.md says how and where that
// is verified). Acts are device-local buffers from a pool; ops are recorded
// into one command stream, in order, and submitted when the host needs a
// value: read(), the stores into a session's caches, the KDA state.
//
// Placement, within the device memory budget (--device-memory): spine
// weights (every view without a key) are uploaded once, keyed by their host
// pointers; routed experts (views with a WeightView::key) fill a device
// expert tier above the RAM cache as they are first used, least recently
// used out first, giving way to the spine. What does not fit is staged per
// use into host-visible memory the shaders read. Session state (K/V and latent caches, KDA state)
// stays in host memory as the sessions own it: attention stages the cached
// positions it reads, the stores write back.
#pragma once

#include <list>
#include <map>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "backend/vulkan/vulkan_device.h"

namespace deltafin {

struct VulkanStats {
  uint64_t submits = 0, dispatches = 0;
  uint64_t spine_bytes_on_device = 0;  // uploaded once
  uint64_t weight_bytes_staged = 0;    // what was read from RAM per use: experts the tier did not take, spine past the budget
  uint64_t state_bytes_staged = 0;     // caches and recurrent state read from the host
  // The device expert tier: routed experts' tensors kept in device memory
  // (keyed by WeightView::key), least recently used out first.
  uint64_t tier_hits = 0, tier_misses = 0, tier_evictions = 0, tier_bytes = 0;
};

class VulkanBackend final : public Backend {
public:
  // device_budget_bytes: device memory the spine may take (0: 90 % of the
  // largest device-local heap). pool: host threads for the ops that run on
  // the host's state alone (kda_replay).
  VulkanBackend(const VulkanDeviceInfo& device, uint64_t device_budget_bytes, ThreadPool* pool);
  ~VulkanBackend() override;
  const char* name() const override { return "vulkan"; }
  const VulkanDeviceInfo& device_info() const { return dev_->info(); }
  bool native_fma() const { return dev_->native_fma(); }
  VulkanStats stats() const { return stats_; }
  size_t slots_made() const;

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

private:
  struct ActBuffer {
    VkBuf buf;
    size_t floats = 0;
  };
  // Host-visible bytes for one batch of recorded ops: staged inputs and the
  // values a submit copies back. Chunks are reused after every submit.
  struct Staged {
    const VkBuf* buf = nullptr;
    size_t offset = 0;
    void* host = nullptr;  // the mapped bytes
    VkDeviceAddress address = 0;
  };
  struct DeviceWeight {
    VkBuf data, scales;
    uint64_t check = 0;  // a hash of the first bytes, to notice reused memory
  };
  struct WeightAddresses {
    VkDeviceAddress data = 0, scales = 0;
  };

  Slot acquire(size_t floats) override;
  void release(uint32_t slot) override;
  static const VkBuf& buf(const Act& a) { return static_cast<ActBuffer*>(storage_of(a))->buf; }
  static VkDeviceAddress addr(const Act& a) { return buf(a).address; }

  Staged stage(size_t bytes);
  Staged stage(const void* host, size_t bytes);
  template <class T>
  VkDeviceAddress stage_span(std::span<const T> s) {
    return s.empty() ? 0 : stage(s.data(), s.size_bytes()).address;
  }
  // Copies `bytes` of src at src_offset into `host` once the next submit has run.
  void read_back(const VkBuf& src, size_t src_offset, void* host, size_t bytes);
  void sync();  // submits what was recorded, waits, then lands the read-backs
  WeightAddresses weight(const WeightView& w);
  WeightAddresses tier_weight(const WeightView& w);
  WeightAddresses staged_weight(const WeightView& w);
  bool upload(const WeightView& w, DeviceWeight& dw);  // false: no device memory for it
  void evict_oldest_expert();
  const VkBuf& scratch(size_t bytes);
  void attention_scratch(size_t T, size_t H, size_t start);
  void dispatch(const char* shader, const void* push, size_t bytes, size_t groups, uint32_t z = 1);
  void elementwise(uint32_t op, VkDeviceAddress a, VkDeviceAddress b, VkDeviceAddress out, size_t n,
                   uint32_t src_width = 0, uint32_t dst_width = 0, uint32_t dst_col = 0, Gate fn = {});
  void rmsnorm_vectors(VkDeviceAddress x, VkDeviceAddress w, VkDeviceAddress y, size_t vectors, size_t n,
                       size_t x_stride, size_t y_stride, float eps);
  bool attend(VkDeviceAddress q, VkDeviceAddress keys, VkDeviceAddress values, VkDeviceAddress out, size_t T,
              size_t H, size_t group, size_t dk, size_t dv, size_t key_stride, size_t value_stride,
              size_t head_offset, size_t start, float scale, const std::function<bool()>& stop_between_blocks);

  std::unique_ptr<VulkanDevice> dev_;
  uint64_t budget_ = 0, spine_bytes_ = 0;
  CpuBackend host_;
  mutable std::mutex pool_mutex_;
  std::vector<std::unique_ptr<ActBuffer>> slots_;
  std::map<size_t, std::vector<uint32_t>> free_;  // size class -> free slots
  struct Chunk {
    VkBuf buf;
    size_t used = 0;
  };
  std::vector<std::unique_ptr<Chunk>> arena_;  // Staged and ReadBack point into them
  bool trim_arena_ = false;
  struct ReadBack {
    const VkBuf* staged;
    size_t offset;
    void* host;
    size_t bytes;
  };
  std::vector<ReadBack> read_backs_;
  std::map<std::pair<const void*, const void*>, DeviceWeight> weights_;
  struct TierEntry {
    DeviceWeight w;
    std::list<uint64_t>::iterator lru;
  };
  std::unordered_map<uint64_t, TierEntry> tier_;
  std::list<uint64_t> tier_lru_;   // front: the most recently used
  std::vector<VkBuf> retired_;     // evicted; freed once the commands that may read them have run
  VkBuf tables_, scratch_;
  VkDeviceAddress dtab_ = 0, ftab_ = 0;
  bool in_experts_ = false, spine_full_ = false;
  VulkanStats stats_;
};

}  // namespace deltafin
