#include "backend/vulkan/vulkan_backend.h"

#include "backend/act_size_class.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/portable_math.h"
#include "util/error.h"

namespace deltafin {

namespace {

// Push constants, field for field the shaders' blocks (std430: each buffer
// reference is an 8-byte address).
struct MatmulPush {
  uint64_t w, scales, x, y, ftab;
  uint32_t type, rows, cols, T;
};
struct ElementwisePush {
  uint64_t a, b, out, dtab;
  uint32_t op, n, src_width, dst_width, dst_col;
  float beta, beta_lin;
};
struct RmsnormPush {
  uint64_t x, w, y;
  uint32_t vectors, n, x_stride, y_stride, has_w;
  float eps;
};
struct RopePush {
  uint64_t x, cos, sin;
  uint32_t rows, width, head_dim, interleaved;
};
struct EmbedPush {
  uint64_t table, ids, out;
  uint32_t n, d, bf16;
};
struct WeightedSumPush {
  uint64_t y, w, out;
  uint32_t rows, k, d;
};
struct DepthMixPush {
  uint64_t values, s, out, dtab;
  uint32_t n_values, rows, d;
  float eps;
};
struct AttentionPush {
  uint64_t q, keys, values, out, scores, dtab;
  uint32_t T, H, group, dk, dv, key_stride, value_stride, head_offset, start, t0, n_max;
  float scale;
};
struct KdaPush {
  uint64_t in, params, state, trace, out, dtab;
  uint32_t T, H, K, kernel, has_trace;
  float eps, lower, q_scale;
};

constexpr size_t kArenaChunk = size_t{64} << 20;
constexpr size_t kStageAlign = 64;
constexpr uint32_t kMaxGroups = 65535;
// Attention's per-row scores live in one device buffer of at most this many
// floats; a call whose rows would need more runs in slices of rows.
constexpr size_t kScoreFloats = size_t{64} << 20;
constexpr size_t kMaxMatmulRows = size_t{8} * kMaxGroups;  // matmul.comp: 8 x rows per tile, tiles in z
constexpr size_t kMaxRopeHead = 512, kMaxKdaHead = 256, kMaxMixValues = 256;

void check_shape(const Act& a, size_t rows, size_t width, const char* op, const char* what) {
  if (a.empty() || a.rows() != rows || a.width() != width)
    fail("vulkan backend: ", op, ": ", what, " is [", a.rows(), ", ", a.width(), "], expected [", rows, ", ", width, "]");
}

uint32_t u32(size_t v, const char* what) {
  if (v > UINT32_MAX) fail("vulkan backend: ", what, " of ", v, " is past the shaders' 32-bit indices");
  return static_cast<uint32_t>(v);
}

size_t data_bytes(const WeightView& w) {
  const size_t n = w.rows * w.cols;
  switch (w.type) {
    case WeightType::F32: return 4 * n;
    case WeightType::BF16: return 2 * n;
    case WeightType::Int8Row:
    case WeightType::FP8Block: return n;
    case WeightType::MXFP4:
    case WeightType::Int4Group32: return n / 2;
  }
  return 0;
}

size_t scale_bytes(const WeightView& w) {
  switch (w.type) {
    case WeightType::Int8Row: return 2 * w.rows;
    case WeightType::MXFP4: return w.rows * w.cols / 32;
    case WeightType::FP8Block:
      return 4 * ((w.rows + kFp8BlockSize - 1) / kFp8BlockSize) * ((w.cols + kFp8BlockSize - 1) / kFp8BlockSize);
    case WeightType::Int4Group32: return 2 * w.rows * w.cols / 32;
    default: return 0;
  }
}

uint64_t head_hash(const void* p, size_t bytes) {  // FNV-1a of the first 64 bytes
  const auto* b = static_cast<const uint8_t*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < std::min<size_t>(bytes, 64); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace

VulkanBackend::VulkanBackend(const VulkanDeviceInfo& device, uint64_t device_budget_bytes, ThreadPool* pool)
    : dev_(std::make_unique<VulkanDevice>(device)), host_(pool) {
  budget_ = device_budget_bytes ? device_budget_bytes : device.device_local_bytes / 10 * 9;
  // The decode tables and exp constants, from the CPU's own arrays: doubles
  // (exp2 table, exp constants) then floats (shaders/common.glsl kTab*).
  std::vector<double> d(kernels_detail::kPortableExp2Table, kernels_detail::kPortableExp2Table + 32);
  d.insert(d.end(), kernels_detail::kPortableExpConstants, kernels_detail::kPortableExpConstants + 6);
  d.resize(40);
  std::vector<float> f;
  f.insert(f.end(), kernels_detail::kE2M1Signed, kernels_detail::kE2M1Signed + 16);
  f.insert(f.end(), kernels_detail::kE8M0Scale, kernels_detail::kE8M0Scale + 256);
  f.insert(f.end(), kernels_detail::kE4M3, kernels_detail::kE4M3 + 256);
  f.insert(f.end(), kernels_detail::kInt4Signed, kernels_detail::kInt4Signed + 16);
  tables_ = dev_->make_buffer(d.size() * 8 + f.size() * 4, true);
  std::memcpy(tables_.mapped, d.data(), d.size() * 8);
  std::memcpy(static_cast<char*>(tables_.mapped) + d.size() * 8, f.data(), f.size() * 4);
  dtab_ = tables_.address;
  ftab_ = tables_.address + d.size() * 8;
}

VulkanBackend::~VulkanBackend() {
  try {
    dev_->submit_and_wait();
  } catch (...) {
  }
  for (auto& s : slots_) dev_->free_buffer(s->buf);
  for (auto& c : arena_) dev_->free_buffer(c->buf);
  for (auto& [key, w] : weights_) dev_->free_buffer(w.data), dev_->free_buffer(w.scales);
  for (auto& [key, e] : tier_) dev_->free_buffer(e.w.data), dev_->free_buffer(e.w.scales);
  for (VkBuf& b : retired_) dev_->free_buffer(b);
  dev_->free_buffer(tables_);
  dev_->free_buffer(scratch_);
}

// ---------------------------------------------------------------------------
// Buffers

Backend::Slot VulkanBackend::acquire(size_t floats) {
  const size_t cls = act_size_class(floats);
  std::lock_guard<std::mutex> lock(pool_mutex_);
  auto& free = free_[cls];
  uint32_t index;
  if (!free.empty()) {
    index = free.back();
    free.pop_back();
  } else {
    index = static_cast<uint32_t>(slots_.size());
    auto a = std::make_unique<ActBuffer>();
    a->buf = dev_->make_buffer(cls * sizeof(float), false);
    a->floats = cls;
    slots_.push_back(std::move(a));
  }
  return {index, slots_[index].get()};
}

// A slot given back may still be read or written by recorded commands; the
// next user's commands come after them in the same stream, so reuse is safe.
void VulkanBackend::release(uint32_t slot) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  free_[slots_[slot]->floats].push_back(slot);
}

size_t VulkanBackend::slots_made() const {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  return slots_.size();
}

VulkanBackend::Staged VulkanBackend::stage(size_t bytes) {
  bytes = (bytes + kStageAlign - 1) / kStageAlign * kStageAlign;
  if (trim_arena_) {  // nothing staged since the last submit: one-off large chunks go back
    trim_arena_ = false;
    std::erase_if(arena_, [&](std::unique_ptr<Chunk>& c) {
      if (c->buf.bytes <= kArenaChunk || arena_.size() == 1) return false;
      dev_->free_buffer(c->buf);
      return true;
    });
  }
  for (auto& c : arena_)
    if (c->buf.bytes - c->used >= bytes) {
      Staged s{&c->buf, c->used, static_cast<char*>(c->buf.mapped) + c->used, c->buf.address + c->used};
      c->used += bytes;
      return s;
    }
  auto c = std::make_unique<Chunk>();
  c->buf = dev_->make_buffer(std::max(bytes, kArenaChunk), true);
  c->used = bytes;
  arena_.push_back(std::move(c));
  const VkBuf& b = arena_.back()->buf;
  return {&b, 0, b.mapped, b.address};
}

VulkanBackend::Staged VulkanBackend::stage(const void* host, size_t bytes) {
  Staged s = stage(bytes);
  if (bytes) std::memcpy(s.host, host, bytes);
  return s;
}

void VulkanBackend::read_back(const VkBuf& src, size_t src_offset, void* host, size_t bytes) {
  if (bytes == 0) return;
  Staged s = stage(bytes);
  dev_->copy(src, src_offset, *s.buf, s.offset, bytes);
  read_backs_.push_back({s.buf, s.offset, host, bytes});
}

void VulkanBackend::sync() {
  if (dev_->recording()) ++stats_.submits;
  dev_->submit_and_wait();
  for (const ReadBack& r : read_backs_) std::memcpy(r.host, static_cast<const char*>(r.staged->mapped) + r.offset, r.bytes);
  read_backs_.clear();
  for (VkBuf& b : retired_) dev_->free_buffer(b);
  retired_.clear();
  // Staged bytes stay readable until the next stage() (kda_recurrence reads
  // its state there after the submit).
  for (auto& c : arena_) c->used = 0;
  trim_arena_ = true;
}

const VkBuf& VulkanBackend::scratch(size_t bytes) {
  if (scratch_.bytes < bytes) {
    sync();  // recorded commands may still use the old buffer
    dev_->free_buffer(scratch_);
    scratch_ = dev_->make_buffer(std::max(bytes, scratch_.bytes * 2), false);
  }
  return scratch_;
}

static size_t device_bytes(const VkBuf& b) { return b.bytes; }

// Uploads w's data and scales into new device buffers (copied from staged
// bytes by the command stream).
bool VulkanBackend::upload(const WeightView& w, DeviceWeight& dw) {
  const size_t db = data_bytes(w), sb = scale_bytes(w);
  if (!dev_->try_make_buffer(db, false, dw.data)) return false;
  if (sb && !dev_->try_make_buffer(sb, false, dw.scales)) {
    dev_->free_buffer(dw.data);
    return false;
  }
  Staged sd = stage(w.data, db);
  dev_->copy(*sd.buf, sd.offset, dw.data, 0, db);
  if (sb) {
    Staged ss = stage(w.scales, sb);
    dev_->copy(*ss.buf, ss.offset, dw.scales, 0, sb);
  }
  return true;
}

VulkanBackend::WeightAddresses VulkanBackend::staged_weight(const WeightView& w) {
  const size_t db = data_bytes(w), sb = scale_bytes(w);
  stats_.weight_bytes_staged += db + sb;
  WeightAddresses a;
  a.data = stage(w.data, db).address;
  if (sb) a.scales = stage(w.scales, sb).address;
  return a;
}

// Its buffers are freed after the next submit: recorded commands may read them.
void VulkanBackend::evict_oldest_expert() {
  const uint64_t key = tier_lru_.back();
  tier_lru_.pop_back();
  auto it = tier_.find(key);
  stats_.tier_bytes -= device_bytes(it->second.w.data) + device_bytes(it->second.w.scales);
  retired_.push_back(it->second.w.data);
  retired_.push_back(it->second.w.scales);
  tier_.erase(it);
  ++stats_.tier_evictions;
}

// A routed expert's tensor: from the tier, or into it (making room by
// evicting the least recently used), or staged when it cannot fit.
VulkanBackend::WeightAddresses VulkanBackend::tier_weight(const WeightView& w) {
  auto it = tier_.find(w.key);
  if (it != tier_.end()) {
    ++stats_.tier_hits;
    tier_lru_.splice(tier_lru_.begin(), tier_lru_, it->second.lru);
    return {it->second.w.data.address, it->second.w.scales.buffer ? it->second.w.scales.address : 0};
  }
  ++stats_.tier_misses;
  const uint64_t need = data_bytes(w) + scale_bytes(w);
  if (spine_bytes_ + need > budget_) return staged_weight(w);
  while (!tier_lru_.empty() && spine_bytes_ + stats_.tier_bytes + need > budget_) evict_oldest_expert();
  TierEntry e;
  if (!upload(w, e.w)) return staged_weight(w);
  stats_.tier_bytes += device_bytes(e.w.data) + device_bytes(e.w.scales);
  tier_lru_.push_front(w.key);
  e.lru = tier_lru_.begin();
  const WeightAddresses a{e.w.data.address, e.w.scales.buffer ? e.w.scales.address : 0};
  tier_.emplace(w.key, e);
  return a;
}

// A spine matrix is uploaded once (experts of the tier give way to it); a
// view without a key inside run_experts, or a matrix past the device
// budget, is staged for this use only. The first bytes' hash guards against
// a host buffer freed and reused at the same address (a re-upload, never
// stale weights).
VulkanBackend::WeightAddresses VulkanBackend::weight(const WeightView& w) {
  if (w.key != 0) return tier_weight(w);
  const size_t db = data_bytes(w), sb = scale_bytes(w);
  if (in_experts_ || spine_full_) return staged_weight(w);
  const auto key = std::make_pair(w.data, w.scales);
  const uint64_t check = head_hash(w.data, db) ^ (sb ? head_hash(w.scales, sb) * 31 : 0);
  auto it = weights_.find(key);
  if (it != weights_.end() && it->second.check == check && it->second.data.bytes >= db)
    return {it->second.data.address, sb ? it->second.scales.address : 0};
  if (it != weights_.end()) {
    spine_bytes_ -= device_bytes(it->second.data) + device_bytes(it->second.scales);
    retired_.push_back(it->second.data);
    retired_.push_back(it->second.scales);
    weights_.erase(it);
  }
  while (!tier_lru_.empty() && spine_bytes_ + stats_.tier_bytes + db + sb > budget_) evict_oldest_expert();
  DeviceWeight dw;
  dw.check = check;
  if (spine_bytes_ + db + sb > budget_ || !upload(w, dw)) {
    spine_full_ = true;  // the rest of the spine is staged per use
    return staged_weight(w);
  }
  spine_bytes_ += device_bytes(dw.data) + device_bytes(dw.scales);
  stats_.spine_bytes_on_device = spine_bytes_;
  const DeviceWeight& slot = weights_[key] = dw;
  return {slot.data.address, sb ? slot.scales.address : 0};
}

void VulkanBackend::dispatch(const char* shader, const void* push, size_t bytes, size_t groups, uint32_t z) {
  if (groups == 0) return;
  const uint32_t x = static_cast<uint32_t>(std::min<size_t>(groups, kMaxGroups));
  const uint32_t y = u32((groups + x - 1) / x, "a dispatch's groups");
  ++stats_.dispatches;
  dev_->dispatch(shader, push, bytes, x, y, z);
}

// ---------------------------------------------------------------------------
// Moving values

void VulkanBackend::write(Act& dst, size_t row0, std::span<const float> host) {
  if (dst.width() == 0 || host.size() % dst.width() != 0 || row0 * dst.width() + host.size() > dst.size())
    fail("vulkan backend: write of ", host.size(), " values at row ", row0, " into [", dst.rows(), ", ", dst.width(), "]");
  Staged s = stage(host.data(), host.size_bytes());
  dev_->copy(*s.buf, s.offset, buf(dst), row0 * dst.width() * 4, host.size_bytes());
}

void VulkanBackend::read(const Act& src, size_t row0, std::span<float> host) {
  if (src.width() == 0 || host.size() % src.width() != 0 || row0 * src.width() + host.size() > src.size())
    fail("vulkan backend: read of ", host.size(), " values at row ", row0, " from [", src.rows(), ", ", src.width(), "]");
  read_back(buf(src), row0 * src.width() * 4, host.data(), host.size_bytes());
  sync();
}

void VulkanBackend::copy(const Act& src, Act& dst) {
  check_shape(dst, src.rows(), src.width(), "copy", "dst");
  dev_->copy(buf(src), 0, buf(dst), 0, src.size() * 4);
}

void VulkanBackend::copy_rows(const Act& src, size_t first, Act& dst) {
  if (dst.width() != src.width() || first + dst.rows() > src.rows())
    fail("vulkan backend: copy_rows: [", dst.rows(), ", ", dst.width(), "] from row ", first, " of [", src.rows(), ", ",
         src.width(), "]");
  dev_->copy(buf(src), first * src.width() * 4, buf(dst), 0, dst.size() * 4);
}

void VulkanBackend::place_rows(const Act& src, size_t first, Act& dst) {
  if (dst.width() != src.width() || first + src.rows() > dst.rows())
    fail("vulkan backend: place_rows: [", src.rows(), ", ", src.width(), "] at row ", first, " of [", dst.rows(), ", ",
         dst.width(), "]");
  dev_->copy(buf(src), 0, buf(dst), first * dst.width() * 4, src.size() * 4);
}

void VulkanBackend::copy_cols(const Act& src, size_t src_col, size_t n, Act& dst, size_t dst_col) {
  if (src.rows() != dst.rows() || src_col + n > src.width() || dst_col + n > dst.width())
    fail("vulkan backend: copy_cols: ", n, " columns from ", src_col, " of [", src.rows(), ", ", src.width(), "] to ",
         dst_col, " of [", dst.rows(), ", ", dst.width(), "]");
  if (n == 0) return;
  std::vector<VkBufferCopy> regions;
  for (size_t t = 0; t < src.rows(); ++t)
    regions.push_back({(t * src.width() + src_col) * 4, (t * dst.width() + dst_col) * 4, n * 4});
  dev_->copy_regions(buf(src), buf(dst), regions);
}

void VulkanBackend::gather(const Act& src, std::span<const uint32_t> rows, Act& dst) {
  const size_t d = src.width();
  check_shape(dst, rows.size(), d, "gather", "dst");
  std::vector<VkBufferCopy> regions;
  for (size_t j = 0; j < rows.size(); ++j) {
    if (rows[j] >= src.rows()) fail("vulkan backend: gather: row ", rows[j], " of ", src.rows());
    regions.push_back({rows[j] * d * 4, j * d * 4, d * 4});
  }
  if (d) dev_->copy_regions(buf(src), buf(dst), regions);
}

void VulkanBackend::scatter(const Act& src, std::span<const uint32_t> rows, Act& dst) {
  const size_t d = src.width();
  check_shape(src, rows.size(), dst.width(), "scatter", "src");
  std::vector<VkBufferCopy> regions;
  std::vector<char> seen(dst.rows(), 0);
  for (size_t j = 0; j < rows.size(); ++j) {
    if (rows[j] >= dst.rows()) fail("vulkan backend: scatter: row ", rows[j], " of ", dst.rows());
    // One copy command may not write a row twice: a repeated row lands in
    // order, the last one winning, as on the CPU.
    if (seen[rows[j]]) {
      dev_->copy_regions(buf(src), buf(dst), regions);
      regions.clear();
      std::fill(seen.begin(), seen.end(), 0);
    }
    seen[rows[j]] = 1;
    regions.push_back({j * d * 4, rows[j] * d * 4, d * 4});
  }
  if (d) dev_->copy_regions(buf(src), buf(dst), regions);
}

// ---------------------------------------------------------------------------
// Elementwise ops

void VulkanBackend::elementwise(uint32_t op, VkDeviceAddress a, VkDeviceAddress b, VkDeviceAddress out, size_t n,
                                uint32_t src_width, uint32_t dst_width, uint32_t dst_col, Gate fn) {
  ElementwisePush p{a, b, out, dtab_, op, u32(n, "elements"), src_width, dst_width, dst_col, fn.beta, fn.beta_lin};
  dispatch("elementwise", &p, sizeof p, (n + 63) / 64);
}

void VulkanBackend::round_bf16(const Act& src, Act& dst, size_t dst_col) {
  const size_t w = src.width();
  if (src.rows() != dst.rows() || dst_col + w > dst.width())
    fail("vulkan backend: round_bf16: [", src.rows(), ", ", w, "] at column ", dst_col, " of [", dst.rows(), ", ",
         dst.width(), "]");
  if (src.size() == 0) return;
  elementwise(2, addr(src), 0, addr(dst), src.size(), u32(w, "width"), u32(dst.width(), "width"), u32(dst_col, "column"));
}

void VulkanBackend::add(Act& x, const Act& d) {
  check_shape(d, x.rows(), x.width(), "add", "d");
  elementwise(0, addr(x), addr(d), addr(x), x.size());
}

void VulkanBackend::mul_sigmoid(Act& x, const Act& g) {
  check_shape(g, x.rows(), x.width(), "mul_sigmoid", "g");
  elementwise(1, addr(x), addr(g), addr(x), x.size());
}

void VulkanBackend::embed(const WeightView& table, std::span<const uint32_t> ids, Act& out) {
  check_shape(out, ids.size(), table.cols, "embed", "out");
  if (table.type != WeightType::BF16 && table.type != WeightType::F32)
    fail("vulkan backend: embed: a ", weight_type_name(table.type), " table (BF16 or F32 only)");
  for (uint32_t id : ids)
    if (id >= table.rows) fail("vulkan backend: embed: id ", id, " outside the table's ", table.rows, " rows");
  if (ids.empty()) return;
  const WeightAddresses t = weight(table);
  EmbedPush p{t.data, stage_span(ids), addr(out), u32(ids.size(), "ids"), u32(table.cols, "width"),
              table.type == WeightType::BF16 ? 1u : 0u};
  u32(table.rows * table.cols, "the table's elements");
  dispatch("embed", &p, sizeof p, (ids.size() * table.cols + 63) / 64);
}

void VulkanBackend::matmul(const WeightView& w, const Act& x, Act& y) {
  check_shape(x, x.rows(), w.cols, "matmul", "x");
  check_shape(y, x.rows(), w.rows, "matmul", "y");
  check_weight(w);
  if (x.rows() == 0 || w.rows == 0) return;
  if (x.rows() > kMaxMatmulRows) {  // past the dispatch's 65,535 tiles of 8 rows: in blocks of rows
    for (size_t r0 = 0; r0 < x.rows(); r0 += kMaxMatmulRows) {
      const size_t n = std::min(kMaxMatmulRows, x.rows() - r0);
      Act xs = act(n, w.cols), ys = act(n, w.rows);
      copy_rows(x, r0, xs);
      matmul(w, xs, ys);
      place_rows(ys, r0, y);
    }
    return;
  }
  u32(w.rows * w.cols, "a matrix's elements");
  u32(x.size(), "x's elements");
  u32(y.size(), "y's elements");
  const WeightAddresses a = weight(w);
  MatmulPush p{a.data, a.scales, addr(x), addr(y), ftab_, static_cast<uint32_t>(w.type), u32(w.rows, "rows"),
               u32(w.cols, "columns"), u32(x.rows(), "rows")};
  dispatch("matmul", &p, sizeof p, w.rows, u32((x.rows() + 7) / 8, "row tiles"));
}

void VulkanBackend::gated_matmul(const WeightView& gate, const WeightView& up, const Act& x, Gate fn, Act& h) {
  const size_t n = x.rows(), I = gate.rows;
  check_shape(x, n, gate.cols, "gated_matmul", "x");
  check_shape(h, n, I, "gated_matmul", "h");
  if (up.rows != gate.rows || up.cols != gate.cols)
    fail("vulkan backend: gated_matmul: up is [", up.rows, ", ", up.cols, "], gate [", gate.rows, ", ", gate.cols, "]");
  check_weight(gate);
  check_weight(up);
  Act g = act(n, I), u = act(n, I);
  matmul(gate, x, g);
  matmul(up, x, u);
  elementwise(fn.kind == Gate::Kind::SiluMul ? 3 : 4, addr(g), addr(u), addr(h), n * I, 0, 0, 0, fn);
}

// ---------------------------------------------------------------------------
// Norms, RoPE, mixes

void VulkanBackend::rmsnorm_vectors(VkDeviceAddress x, VkDeviceAddress w, VkDeviceAddress y, size_t vectors, size_t n,
                                    size_t x_stride, size_t y_stride, float eps) {
  if (vectors == 0 || n == 0) return;
  RmsnormPush p{x, w, y, u32(vectors, "vectors"), u32(n, "width"), u32(x_stride, "stride"), u32(y_stride, "stride"),
                w ? 1u : 0u, eps};
  dispatch("rmsnorm", &p, sizeof p, vectors);
}

void VulkanBackend::rmsnorm(const Act& x, std::span<const float> w, float eps, Act& y) {
  const size_t d = x.width();
  check_shape(y, x.rows(), d, "rmsnorm", "y");
  if (!w.empty() && w.size() != d) fail("vulkan backend: rmsnorm: ", w.size(), " weights for rows of ", d);
  rmsnorm_vectors(addr(x), stage_span(w), addr(y), x.rows(), d, d, d, eps);
}

void VulkanBackend::rmsnorm_heads(Act& x, std::span<const float> w, size_t head_dim, float eps) {
  if (head_dim == 0 || x.width() % head_dim != 0 || w.size() != head_dim)
    fail("vulkan backend: rmsnorm_heads: rows of ", x.width(), ", heads of ", head_dim, ", ", w.size(), " weights");
  rmsnorm_vectors(addr(x), stage_span(w), addr(x), x.size() / head_dim, head_dim, head_dim, head_dim, eps);
}

void VulkanBackend::rope_half(Act& x, size_t head_dim, const Act& cos, const Act& sin) {
  const size_t half = head_dim / 2;
  if (head_dim == 0 || head_dim % 2 != 0 || x.width() % head_dim != 0 || head_dim > kMaxRopeHead)
    fail("vulkan backend: rope_half: rows of ", x.width(), ", heads of ", head_dim);
  check_shape(cos, x.rows(), half, "rope_half", "cos");
  check_shape(sin, x.rows(), half, "rope_half", "sin");
  RopePush p{addr(x), addr(cos), addr(sin), u32(x.rows(), "rows"), u32(x.width(), "width"), u32(head_dim, "head"), 0};
  dispatch("rope", &p, sizeof p, (x.size() / head_dim + 63) / 64);
}

void VulkanBackend::rope_pairs(Act& x, size_t head_dim, const Act& cos, const Act& sin) {
  const size_t half = head_dim / 2;
  if (head_dim == 0 || head_dim % 2 != 0 || x.width() % head_dim != 0 || head_dim > kMaxRopeHead)
    fail("vulkan backend: rope_pairs: rows of ", x.width(), ", heads of ", head_dim);
  check_shape(cos, x.rows(), half, "rope_pairs", "cos");
  check_shape(sin, x.rows(), half, "rope_pairs", "sin");
  RopePush p{addr(x), addr(cos), addr(sin), u32(x.rows(), "rows"), u32(x.width(), "width"), u32(head_dim, "head"), 1};
  dispatch("rope", &p, sizeof p, (x.size() / head_dim + 63) / 64);
}

void VulkanBackend::depth_mix(std::span<const Act* const> values, std::span<const float> s, float eps, Act& out) {
  const size_t T = out.rows(), d = out.width(), n = values.size();
  if (n == 0) fail("vulkan backend: depth_mix: no values");
  if (n > kMaxMixValues) fail("vulkan backend: depth_mix: ", n, " values (at most ", kMaxMixValues, ")");
  for (const Act* v : values) check_shape(*v, T, d, "depth_mix", "a value");
  if (s.size() != d) fail("vulkan backend: depth_mix: ", s.size(), " weights for rows of ", d);
  std::vector<uint64_t> addrs;
  for (const Act* v : values) addrs.push_back(addr(*v));
  DepthMixPush p{stage_span(std::span<const uint64_t>(addrs)), stage_span(s), addr(out), dtab_, u32(n, "values"),
                 u32(T, "rows"), u32(d, "width"), eps};
  dispatch("depth_mix", &p, sizeof p, T);
}

void VulkanBackend::weighted_sum(const Act& y, std::span<const float> w, size_t k, Act& out) {
  const size_t n = out.rows(), d = out.width();
  check_shape(y, n * k, d, "weighted_sum", "y");
  if (w.size() != n * k) fail("vulkan backend: weighted_sum: ", w.size(), " weights for ", n * k, " rows");
  WeightedSumPush p{addr(y), stage_span(w), addr(out), u32(n, "rows"), u32(k, "k"), u32(d, "width")};
  dispatch("weighted_sum", &p, sizeof p, (n * d + 63) / 64);
}

// ---------------------------------------------------------------------------
// Attention: the session's cache stays in host memory

void VulkanBackend::kv_store(const Act& k, const Act& v, KvLayer cache, int64_t start) {
  const size_t w = k.width(), T = k.rows();
  check_shape(v, T, w, "kv_store", "v");
  if (w > cache.stride) fail("vulkan backend: kv_store: rows of ", w, " in a cache of stride ", cache.stride);
  if (start < 0) fail("vulkan backend: kv_store: start position ", start, " is negative");
  if (T == 0) return;
  Staged sk = stage(k.size() * 4), sv = stage(v.size() * 4);
  dev_->copy(buf(k), 0, *sk.buf, sk.offset, k.size() * 4);
  dev_->copy(buf(v), 0, *sv.buf, sv.offset, v.size() * 4);
  sync();
  for (size_t t = 0; t < T; ++t) {
    const size_t at = (static_cast<size_t>(start) + t) * cache.stride;
    std::memcpy(cache.keys + at, static_cast<const float*>(sk.host) + t * w, w * 4);
    std::memcpy(cache.values + at, static_cast<const float*>(sv.host) + t * w, w * 4);
  }
}

// Rows per attention dispatch whose scores fit the scratch buffer.
static size_t score_rows(size_t rows, size_t heads, size_t positions) {
  return std::max<size_t>(1, std::min(rows, kScoreFloats / (heads * positions)));
}

// The scores' buffer for an attention call, made before its inputs are
// staged: growing it submits the recorded work, after which staged bytes
// may be reused.
void VulkanBackend::attention_scratch(size_t T, size_t H, size_t start) {
  size_t floats = 0;
  for (size_t t0 = 0; t0 < T; t0 += kAttentionStopRows) {
    const size_t t1 = std::min(T, t0 + kAttentionStopRows);
    floats = std::max(floats, score_rows(t1 - t0, H, start + t1) * H * (start + t1));
  }
  scratch(floats * 4);
}

bool VulkanBackend::attend(VkDeviceAddress q, VkDeviceAddress keys, VkDeviceAddress values, VkDeviceAddress out,
                           size_t T, size_t H, size_t group, size_t dk, size_t dv, size_t key_stride,
                           size_t value_stride, size_t head_offset, size_t start, float scale,
                           const std::function<bool()>& stop_between_blocks) {
  const size_t block = kAttentionStopRows;
  const VkBuf& scores = scratch_;  // attention_scratch() made it big enough before anything was staged
  for (size_t t0 = 0; t0 < T; t0 += block) {
    const size_t t1 = std::min(T, t0 + block), n_max = start + t1;
    const size_t rows_per = score_rows(t1 - t0, H, n_max);
    for (size_t r0 = t0; r0 < t1; r0 += rows_per) {
      const size_t rows = std::min(rows_per, t1 - r0);
      AttentionPush p{q, keys, values, out, scores.address, dtab_, u32(rows, "rows"), u32(H, "heads"),
                      u32(group, "group"), u32(dk, "dk"), u32(dv, "dv"), u32(key_stride, "stride"),
                      u32(value_stride, "stride"), u32(head_offset, "offset"), u32(start, "start"), u32(r0, "row"),
                      u32(n_max, "positions"), scale};
      dispatch("attention", &p, sizeof p, rows * H);
    }
    if (stop_between_blocks && t1 < T && stop_between_blocks()) return false;
  }
  return true;
}

bool VulkanBackend::attention_gqa(const Act& q, KvLayer cache, const GqaShape& s, Act& out,
                                  const std::function<bool()>& stop) {
  const size_t T = q.rows(), H = s.heads, hd = s.head_dim;
  if (H == 0 || s.kv_heads == 0 || H % s.kv_heads != 0) fail("vulkan backend: attention: ", H, " heads over ", s.kv_heads);
  if (s.start < 0) fail("vulkan backend: attention: start position ", s.start, " is negative");
  const size_t qd = H * hd, start = static_cast<size_t>(s.start), n = start + T;
  check_shape(q, T, qd, "attention", "q");
  check_shape(out, T, qd, "attention", "out");
  if (T == 0) return true;
  attention_scratch(T, H, start);
  const size_t bytes = n * cache.stride * 4;
  stats_.state_bytes_staged += 2 * bytes;
  const VkDeviceAddress keys = stage(cache.keys, bytes).address, values = stage(cache.values, bytes).address;
  return attend(addr(q), keys, values, addr(out), T, H, H / s.kv_heads, hd, hd, cache.stride, cache.stride, hd, start,
                s.scale, stop);
}

void VulkanBackend::latent_store(const Act& ckv, std::span<const float> w, float eps, LatentLayer cache, int64_t start) {
  const size_t R = cache.width(), T = ckv.rows();
  check_shape(ckv, T, R, "latent_store", "ckv");
  if (w.size() != cache.rank) fail("vulkan backend: latent_store: ", w.size(), " norm weights for a latent of ", cache.rank);
  if (start < 0) fail("vulkan backend: latent_store: start position ", start);
  if (T == 0) return;
  Act rows = act(T, R);
  copy(ckv, rows);
  rmsnorm_vectors(addr(rows), stage_span(w), addr(rows), T, cache.rank, R, R, eps);
  read_back(buf(rows), 0, cache.rows + static_cast<size_t>(start) * R, T * R * 4);
  sync();
}

// The CPU asks `stop` before each block of kLatentStopRows cached rows of
// each row's two sweeps; the same questions are asked here, in the same
// order, before the work is recorded.
bool VulkanBackend::attention_latent(const Act& q, LatentLayer cache, const MlaShape& shape, Act& u,
                                     const std::function<bool()>& stop) {
  const size_t T = q.rows(), H = shape.heads, R = cache.width(), rank = cache.rank;
  if (H == 0 || rank == 0) fail("vulkan backend: attention_latent: ", H, " heads of rank ", rank);
  if (shape.start < 0) fail("vulkan backend: attention_latent: start position ", shape.start);
  check_shape(q, T, H * R, "attention_latent", "q");
  check_shape(u, T, H * rank, "attention_latent", "u");
  const size_t base = static_cast<size_t>(shape.start);
  if (stop)
    for (size_t t = 0; t < T; ++t)
      for (int sweep = 0; sweep < 2; ++sweep)
        for (size_t j = 0; j < base + t + 1; j += kLatentStopRows)
          if (stop()) return false;
  if (T == 0) return true;
  attention_scratch(T, H, base);
  const size_t bytes = (base + T) * R * 4;
  stats_.state_bytes_staged += bytes;
  const VkDeviceAddress rows = stage(cache.rows, bytes).address;
  return attend(addr(q), rows, rows, addr(u), T, H, H, R, rank, R, R, 0, base, shape.scale, nullptr);
}

// ---------------------------------------------------------------------------
// KDA: the state is staged, stepped on the device, and copied back

void VulkanBackend::kda_recurrence(const Act& q, const Act& k, const Act& v, const Act& gate, const Act& r, const Act& b,
                                   const KdaParams& p, KdaLayerState state, const KdaTrace* trace, Act& o) {
  const size_t T = q.rows(), H = p.heads, K = p.head_dim, D = H * K, kernel = p.kernel;
  if (H == 0 || K == 0 || kernel == 0) fail("vulkan backend: kda_recurrence: ", H, " heads of ", K, ", kernel ", kernel);
  if (K > kMaxKdaHead) fail("vulkan backend: kda_recurrence: heads of ", K, " (at most ", kMaxKdaHead, ")");
  for (const Act* a : {&q, &k, &v, &gate, &r}) check_shape(*a, T, D, "kda_recurrence", "an input");
  check_shape(b, T, H, "kda_recurrence", "b");
  check_shape(o, T, D, "kda_recurrence", "o");
  if (p.q_conv.size() != D * kernel || p.k_conv.size() != D * kernel || p.v_conv.size() != D * kernel ||
      p.a_log.size() != K || p.dt_bias.size() != D || p.o_norm.size() != K)
    fail("vulkan backend: kda_recurrence: weights do not fit ", H, " heads of ", K, " with kernel ", kernel);
  if (T == 0) return;
  Act in = act(5 * T + (T * H + D - 1) / D, D);  // q, k, v, gate, r, then b
  size_t at = 0;
  for (const Act* a : {&q, &k, &v, &gate, &r, &b}) {
    dev_->copy(buf(*a), 0, buf(in), at, a->size() * 4);
    at += a->size() * 4;
  }
  const size_t conv = D * kernel;
  Staged params = stage((3 * conv + K + D + K) * 4);
  float* pp = static_cast<float*>(params.host);
  for (std::span<const float> s : {p.q_conv, p.k_conv, p.v_conv, p.a_log, p.dt_bias, p.o_norm})
    pp = std::copy(s.begin(), s.end(), pp);
  const size_t state_floats = 3 * conv + H * K * K;
  Staged st = stage(state_floats * 4);
  float* sp = static_cast<float*>(st.host);
  std::copy_n(state.conv_q, conv, sp);
  std::copy_n(state.conv_k, conv, sp + conv);
  std::copy_n(state.conv_v, conv, sp + 2 * conv);
  std::copy_n(state.recurrent, H * K * K, sp + 3 * conv);
  stats_.state_bytes_staged += 2 * state_floats * 4;
  Staged tr = stage(trace ? (4 * T * D + T * H) * 4 : 4);
  KdaPush push{addr(in), params.address, st.address, tr.address, addr(o), dtab_, u32(T, "rows"), u32(H, "heads"),
               u32(K, "head"), u32(kernel, "kernel"), trace ? 1u : 0u, p.eps, p.lower, p.q_scale};
  ++stats_.dispatches;
  dev_->dispatch("kda", &push, sizeof push, u32(H, "heads"));
  if (trace) {
    read_back(buf(q), 0, trace->raw_q, T * D * 4);
    read_back(buf(k), 0, trace->raw_k, T * D * 4);
    read_back(buf(v), 0, trace->raw_v, T * D * 4);
  }
  sync();
  std::copy_n(sp, conv, state.conv_q);
  std::copy_n(sp + conv, conv, state.conv_k);
  std::copy_n(sp + 2 * conv, conv, state.conv_v);
  std::copy_n(sp + 3 * conv, H * K * K, state.recurrent);
  if (trace) {
    const float* t = static_cast<const float*>(tr.host);
    std::copy_n(t, T * D, trace->q);
    std::copy_n(t + T * D, T * D, trace->k);
    std::copy_n(t + 2 * T * D, T * D, trace->v);
    std::copy_n(t + 3 * T * D, T * D, trace->g);
    std::copy_n(t + 4 * T * D, T * H, trace->beta);
  }
}

// The replay reads and writes only host arrays (the trace and the session's
// state): the CPU's kernels step it, with the same bits the device's
// recurrence has (the backend-ops test checks both against the scalar path).
void VulkanBackend::kda_replay(const KdaParams& p, KdaLayerState state, const KdaSteps& steps, size_t rows) {
  sync();
  host_.kda_replay(p, state, steps, rows);
}

// Experts run one after another on the calling thread (the device spreads
// each expert's products); their weights are staged per use.
void VulkanBackend::run_experts(std::span<const size_t> rows_per_expert, const std::function<void(size_t j)>& compute) {
  struct Flag {
    bool& f;
    bool old;
    explicit Flag(bool& flag) : f(flag), old(flag) { f = true; }
    ~Flag() { f = old; }
  } in_experts(in_experts_);
  for (size_t j = 0; j < rows_per_expert.size(); ++j) compute(j);
}

}  // namespace deltafin
