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

void check(const WeightView& w, const float* x, float* y) {
  const char* name = weight_type_name(w.type);
  if (w.type != WeightType::F32 && w.type != WeightType::BF16 && w.type != WeightType::Int8Row &&
      w.type != WeightType::MXFP4)
    fail("matmul: unknown weight type ", static_cast<int>(w.type));
  if (w.data == nullptr) fail("matmul: ", name, " weight [", w.rows, ", ", w.cols, "] has no data");
  if ((w.type == WeightType::Int8Row || w.type == WeightType::MXFP4) && w.scales == nullptr)
    fail("matmul: ", name, " weight [", w.rows, ", ", w.cols, "] has no scales");
  if (w.type == WeightType::MXFP4 && w.cols % 32 != 0)
    fail("matmul: mxfp4 weight [", w.rows, ", ", w.cols, "]: cols must be a multiple of 32");
  if (x == nullptr || y == nullptr) fail("matmul: null input or output");
}

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
  const KernelTable& kt = kernel_table();

  // The SIMD paths read whole 32-column groups: pad each x row with -0.0f so
  // the padding products (w = +0) are -0.0 and leave the lanes unchanged. The
  // copy also aligns the rows to 64 bytes (x_stride is a multiple of 32 floats).
  size_t x_stride = (w.cols + 31) / 32 * 32;
  const float* xp = x;
  if (x_stride != w.cols || reinterpret_cast<uintptr_t>(x) % 64 != 0) {
    float* padded = aligned_floats(tls_padded_x, T * x_stride);
    for (size_t t = 0; t < T; ++t) {
      std::memcpy(padded + t * x_stride, x + t * w.cols, w.cols * sizeof(float));
      std::fill(padded + t * x_stride + w.cols, padded + (t + 1) * x_stride, -0.0f);
    }
    xp = padded;
  }

  size_t scratch_floats = kScratchFixed + kScratchPerT * T + std::min(T, kRelayoutRows) * x_stride;
  auto run = [&](size_t block_begin, size_t block_end) {
    float* scratch = aligned_floats(tls_scratch, scratch_floats);
    size_t row_begin = block_begin * kRowTile;
    size_t row_end = block_end * kRowTile < w.rows ? block_end * kRowTile : w.rows;
    kt.matmul_rows(w, xp, x_stride, T, y, row_begin, row_end, scratch);
  };
  // Split in whole row tiles so every thread's batched loop runs full tiles.
  size_t blocks = (w.rows + kRowTile - 1) / kRowTile;
  if (pool != nullptr && pool->size() > 1) {
    pool->parallel_for(blocks, run);
  } else {
    run(0, blocks);
  }
}

}  // namespace deltafin
