// matmul(): argument checks, x padding, the row split over the pool and the
// choice of path. The per-path loops are in matmul_<isa>.cpp.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernel_table.h"
#include "util/error.h"

namespace deltafin {

using namespace kernels_detail;

namespace {

// Per-thread buffers, grown on demand, so steady-state products allocate nothing.
thread_local std::vector<float> tls_scratch;
thread_local std::vector<float> tls_padded_x;

// n floats of `buffer`, starting on a 64-byte boundary: a 64-byte load that
// straddles two cache lines costs two L1 accesses, which halves the batched
// tile's throughput.
float* aligned_floats(std::vector<float>& buffer, size_t n) {
  if (buffer.size() < n + 16) buffer.resize(n + 16);
  uintptr_t p = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + ((64 - p % 64) % 64) / sizeof(float);
}

}  // namespace

void check_weight(const WeightView& w) {
  const char* name = weight_type_name(w.type);
  if (w.type != WeightType::F32 && w.type != WeightType::BF16 && w.type != WeightType::Int8Row &&
      w.type != WeightType::MXFP4 && w.type != WeightType::FP8Block && w.type != WeightType::Int4Group32)
    fail("matmul: unknown weight type ", static_cast<int>(w.type));
  if (w.data == nullptr) fail("matmul: ", name, " weight [", w.rows, ", ", w.cols, "] has no data");
  if (w.type != WeightType::F32 && w.type != WeightType::BF16 && w.scales == nullptr)
    fail("matmul: ", name, " weight [", w.rows, ", ", w.cols, "] has no scales");
  if ((w.type == WeightType::MXFP4 || w.type == WeightType::Int4Group32) && w.cols % 32 != 0)
    fail("matmul: ", name, " weight [", w.rows, ", ", w.cols, "]: cols must be a multiple of 32");
}

namespace {

void check(const WeightView& w, const float* x, float* y) {
  check_weight(w);
  if (x == nullptr || y == nullptr) fail("matmul: null input or output");
}

// x padded to whole 32-column groups and 64-byte aligned, as the paths read
// it: x itself when it already is, else a copy in this thread's buffer.
const float* padded_input(const WeightView& w, const float* x, size_t T, size_t x_stride) {
  // The SIMD paths read whole 32-column groups: pad each x row with -0.0f so
  // the padding products (w = +0) are -0.0 and leave the lanes unchanged. The
  // copy also aligns the rows to 64 bytes (x_stride is a multiple of 32 floats).
  if (x_stride == w.cols && reinterpret_cast<uintptr_t>(x) % 64 == 0) return x;
  float* padded = aligned_floats(tls_padded_x, T * x_stride);
  for (size_t t = 0; t < T; ++t) {
    std::memcpy(padded + t * x_stride, x + t * w.cols, w.cols * sizeof(float));
    std::fill(padded + t * x_stride + w.cols, padded + (t + 1) * x_stride, -0.0f);
  }
  return padded;
}

// One product's share of a parallel_for: row tiles [block_begin, block_end)
// of y = w x (x already padded), on this thread's scratch.
void run_blocks(const WeightView& w, const float* xp, size_t x_stride, size_t T, float* y, size_t block_begin,
                size_t block_end) {
  size_t scratch_floats = kScratchFixed + kScratchPerT * T + std::min(T, kRelayoutRows) * x_stride;
  float* scratch = aligned_floats(tls_scratch, scratch_floats);
  size_t row_begin = block_begin * kRowTile;
  size_t row_end = block_end * kRowTile < w.rows ? block_end * kRowTile : w.rows;
  kernel_table().matmul_rows(w, xp, x_stride, T, y, row_begin, row_end, scratch);
}

size_t row_tiles(const WeightView& w) { return (w.rows + kRowTile - 1) / kRowTile; }

}  // namespace

void matmul(const WeightView& w, const float* x, size_t T, float* y, ThreadPool* pool) {
  if (T == 0 || w.rows == 0) return;
  check(w, x, y);
  // Longer calls go in blocks of kMaxRowsPerCall rows. Every output row is
  // its own canonical reduction, so blocking changes no bit; it keeps the
  // per-thread scratch and the padded input copy below bounded, where they
  // would otherwise grow with a prefill pass's rows (the router's product
  // over a whole group: memory the plan does not count, kept by the threads).
  if (T > kMaxRowsPerCall) {
    for (size_t t0 = 0; t0 < T; t0 += kMaxRowsPerCall)
      matmul(w, x + t0 * w.cols, std::min(kMaxRowsPerCall, T - t0), y + t0 * w.rows, pool);
    return;
  }
  if (w.cols == 0) {  // an empty sum is +0 in every lane
    std::memset(y, 0, T * w.rows * sizeof(float));
    return;
  }
  size_t x_stride = (w.cols + 31) / 32 * 32;
  const float* xp = padded_input(w, x, T, x_stride);
  // Split in whole row tiles so every thread's batched loop runs full tiles.
  size_t blocks = row_tiles(w);
  auto run = [&](size_t block_begin, size_t block_end) { run_blocks(w, xp, x_stride, T, y, block_begin, block_end); };
  if (pool != nullptr && pool->size() > 1) {
    pool->parallel_for(blocks, run);
  } else {
    run(0, blocks);
  }
}

void matmul_pair(const WeightView& a, const WeightView& b, const float* x, size_t T, float* ya, float* yb,
                 ThreadPool* pool) {
  if (a.cols != b.cols)
    fail("matmul_pair: the two weights take different inputs ([", a.rows, ", ", a.cols, "] and [", b.rows, ", ",
         b.cols, "])");
  if (pool == nullptr || pool->size() < 2 || T > kMaxRowsPerCall || a.cols == 0 || a.rows == 0 || b.rows == 0 ||
      T == 0) {
    matmul(a, x, T, ya, pool);
    matmul(b, x, T, yb, pool);
    return;
  }
  check(a, x, ya);
  check(b, x, yb);
  size_t x_stride = (a.cols + 31) / 32 * 32;
  const float* xp = padded_input(a, x, T, x_stride);
  // One hand-off for both: the row tiles of a, then those of b, as one range.
  // A range that straddles the two runs each part on its own product.
  const size_t blocks_a = row_tiles(a), blocks_b = row_tiles(b);
  pool->parallel_for(blocks_a + blocks_b, [&](size_t begin, size_t end) {
    if (begin < blocks_a) run_blocks(a, xp, x_stride, T, ya, begin, std::min(end, blocks_a));
    if (end > blocks_a) run_blocks(b, xp, x_stride, T, yb, std::max(begin, blocks_a) - blocks_a, end - blocks_a);
  });
}

void matmul_pair(const WeightView& a, const WeightView& b, const float* x, size_t T, float* ya, float* yb,
                 ThreadPool* pool, FunctionRef<void(size_t row_begin, size_t row_end)> then) {
  if (a.cols != b.cols || a.rows != b.rows)
    fail("matmul_pair: a gated pair needs two weights of one shape ([", a.rows, ", ", a.cols, "] and [", b.rows, ", ",
         b.cols, "])");
  if (pool == nullptr || pool->size() < 2 || T > kMaxRowsPerCall || a.cols == 0 || a.rows == 0 || T == 0) {
    matmul_pair(a, b, x, T, ya, yb, pool);
    if (pool != nullptr && pool->size() > 1) pool->parallel_for(a.rows, then);
    else if (a.rows > 0) then(0, a.rows);
    return;
  }
  check(a, x, ya);
  check(b, x, yb);
  size_t x_stride = (a.cols + 31) / 32 * 32;
  const float* xp = padded_input(a, x, T, x_stride);
  pool->parallel_for(row_tiles(a), [&](size_t begin, size_t end) {
    run_blocks(a, xp, x_stride, T, ya, begin, end);
    run_blocks(b, xp, x_stride, T, yb, begin, end);
    then(begin * kRowTile, std::min(end * kRowTile, a.rows));
  });
}

}  // namespace deltafin
