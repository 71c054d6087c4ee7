// Scalar reference product: one output row at a time, weights decoded one
// block of columns at a time and reused for every x row, each output summed
// into 32 lane accumulators (lane = column mod 32) and closed by lane_tree.
#include <cmath>
#include <cstring>

#include "kernels/kernel_table.h"
#include "util/numeric.h"

namespace deltafin::kernels_detail {

namespace {

// Decodes columns [c0, c0 + n) of row r to fp32, exactly.
void decode_run(const WeightView& w, size_t r, size_t c0, size_t n, float* out) {
  size_t base = r * w.cols + c0;
  switch (w.type) {
    case WeightType::F32:
      std::memcpy(out, static_cast<const float*>(w.data) + base, n * sizeof(float));
      break;
    case WeightType::BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + base;
      for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    case WeightType::Int8Row: {
      const int8_t* p = static_cast<const int8_t*>(w.data) + base;
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);  // the scale applies after the dot
      break;
    }
    case WeightType::MXFP4: {
      const uint8_t* packed = static_cast<const uint8_t*>(w.data);
      const uint8_t* scales = static_cast<const uint8_t*>(w.scales);
      for (size_t i = 0; i < n; ++i) {
        size_t e = base + i;
        uint8_t byte = packed[e / 2];
        uint8_t nibble = (e % 2 == 0) ? (byte & 0xF) : (byte >> 4);
        // e2m1 has at most two significant bits, so this product is exact
        // (subnormal included): it equals ldexpf(e2m1, scale - 127).
        out[i] = kE2M1Signed[nibble] * kE8M0Scale[scales[e / 32]];
      }
      break;
    }
    case WeightType::FP8Block: {
      // One scale per 128 x 128 block: the code's exact value times it,
      // rounded once (DeepSeek's weight_dequant in fp32).
      const uint8_t* codes = static_cast<const uint8_t*>(w.data) + base;
      const float* scales = static_cast<const float*>(w.scales) +
                            (r / kFp8BlockSize) * ((w.cols + kFp8BlockSize - 1) / kFp8BlockSize);
      for (size_t i = 0; i < n; ++i) out[i] = kE4M3[codes[i]] * scales[(c0 + i) / kFp8BlockSize];
      break;
    }
    case WeightType::Int4Group32: {
      // Column 8j + k is nibble k of the row's word j; (u - 8) times a bf16
      // scale has at most 12 significant bits, so the product is exact.
      const uint8_t* words = static_cast<const uint8_t*>(w.data);
      const uint16_t* scales = static_cast<const uint16_t*>(w.scales);
      for (size_t i = 0; i < n; ++i) {
        size_t e = base + i;
        uint32_t word;
        std::memcpy(&word, words + 4 * (e / 8), 4);
        out[i] = kInt4Signed[(word >> (4 * (e % 8))) & 15] * bf16_to_f32(scales[e / 32]);
      }
      break;
    }
  }
}

}  // namespace

void matmul_rows_scalar(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y,
                        size_t row_begin, size_t row_end, float* scratch) {
  float* dec = scratch;
  float* acc = scratch + kScratchFixed;  // [T][32]
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t i = 0; i < T * 32; ++i) acc[i] = 0.0f;
    for (size_t c0 = 0; c0 < w.cols; c0 += kColBlock) {
      size_t n = w.cols - c0 < kColBlock ? w.cols - c0 : kColBlock;
      decode_run(w, r, c0, n, dec);
      for (size_t t = 0; t < T; ++t) {
        const float* xt = x + t * x_stride + c0;
        float* a = acc + t * 32;
        // c0 is a multiple of 32, so column c0 + i lands in lane i % 32.
        for (size_t i = 0; i < n; ++i) a[i % 32] = std::fma(dec[i], xt[i], a[i % 32]);
      }
    }
    float scale = 1.0f;
    if (w.type == WeightType::Int8Row) scale = f16_to_f32(static_cast<const uint16_t*>(w.scales)[r]);
    for (size_t t = 0; t < T; ++t) {
      float dot = lane_tree(acc + t * 32);
      y[t * w.rows + r] = (w.type == WeightType::Int8Row) ? dot * scale : dot;
    }
  }
}

}  // namespace deltafin::kernels_detail
