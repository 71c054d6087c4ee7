// NEON product (AArch64 builds only; Advanced SIMD is part of the base
// architecture, so no run-time check guards it). The 32 canonical lane
// accumulators of one output are eight float32x4_t (lanes 0-3, ..., 28-31),
// so a column group of 32 is eight vfmaq_f32, each lane exactly the scalar
// std::fma, and the lane tree's eight 4-lane vectors are those registers.
// The loops have the shape of matmul_avx2.cpp; see kernel_table.h for what
// this file may and may not use.
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_neon.h"  // arm_neon.h, lane_tree_neon
#include "util/numeric.h"  // f16_to_f32 (out of line)

namespace deltafin::kernels_detail {

namespace {

struct Group {
  float32x4_t v[8];  // columns 0-3, 4-7, ..., 28-31
};

template <WeightType kType>
constexpr size_t group_bytes() {
  return kType == WeightType::F32                                   ? 128
         : kType == WeightType::BF16                                ? 64
         : kType == WeightType::Int8Row || kType == WeightType::FP8Block ? 32
                                                                    : 16;  // MXFP4, Int4Group32
}

// The types whose bytes are two 4-bit codes each, low nibble first, decoded
// through a 16-entry table (MXFP4: e2m1 times the scale; Int4Group32: u - 8
// times the scale).
template <WeightType kType>
constexpr bool nibbles() {
  return kType == WeightType::MXFP4 || kType == WeightType::Int4Group32;
}

// The lookup of one group of 4-bit codes: the signed e2m1 table times the
// group's scale (MXFP4; exact: every entry has at most two significant bits)
// or u - 8 times the bf16 scale (Int4Group32; exact: at most 12 significant
// bits), as 64 bytes for TBL, which looks bytes up in up to four 16-byte
// registers. FP8Block keeps its group's scale in every lane of scale.
struct Lut {
  uint8x16x4_t bytes;
  float32x4_t scale;
};

// FP8Block's first n codes at p times the group's scale, from the exact table
// (padding +0): the decode of a group that holds a NaN code and of a row's
// partial last group.
Group fp8_from_table(const uint8_t* p, size_t n, float32x4_t scale) {
  const float s = vgetq_lane_f32(scale, 0);
  float f[32];
  for (size_t i = 0; i < 32; ++i) f[i] = i < n ? kE4M3[p[i]] * s : 0.0f;
  Group d;
  for (int k = 0; k < 8; ++k) d.v[k] = vld1q_f32(f + 4 * k);
  return d;
}

// Decodes the 32 weights at p exactly. MXFP4: byte j holds column 2j in its
// low nibble and 2j + 1 in its high one; ZIP interleaves the two nibble
// vectors into one code per column (columns 0-15, then 16-31). For the four
// columns of a vector, TBL repeats each code four times, and code * 4 + (0, 1,
// 2, 3) are the byte offsets of its float in the table, which a second TBL
// gathers. Code 8 is -0.0, as the definition says. Int4Group32 is packed
// alike (a little-endian word's nibble k is byte k / 2's low or high nibble)
// and takes the same path with its own table. FP8Block: e4m3 x 2^-120 by
// the bit placement of kernel_table.h (kE4M3Bits), exact, times the group's
// scale x 2^120, the definition's one rounding; a group holding a NaN code,
// or whose scale x 2^120 overflows, takes the table.
template <WeightType kType>
inline Group decode(const uint8_t* p, const Lut& lut) {
  Group d;
  if constexpr (kType == WeightType::F32) {
    (void)lut;
    for (int k = 0; k < 8; ++k) d.v[k] = vld1q_f32(reinterpret_cast<const float*>(p) + 4 * k);
  } else if constexpr (kType == WeightType::BF16) {
    (void)lut;
    // bf16 is the top half of an fp32: widen each uint16 into the high 16 bits.
    for (int q = 0; q < 4; ++q) {
      uint16x8_t u = vld1q_u16(reinterpret_cast<const uint16_t*>(p) + 8 * q);
      d.v[2 * q] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(u), 16));
      d.v[2 * q + 1] = vreinterpretq_f32_u32(vshll_high_n_u16(u, 16));
    }
  } else if constexpr (kType == WeightType::Int8Row) {
    (void)lut;
    // int8 -> int32 -> fp32 is exact; the row scale applies after the dot.
    for (int h = 0; h < 2; ++h) {
      int8x16_t b = vld1q_s8(reinterpret_cast<const int8_t*>(p) + 16 * h);
      int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
      d.v[4 * h + 0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
      d.v[4 * h + 1] = vcvtq_f32_s32(vmovl_high_s16(lo));
      d.v[4 * h + 2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
      d.v[4 * h + 3] = vcvtq_f32_s32(vmovl_high_s16(hi));
    }
  } else if constexpr (kType == WeightType::FP8Block) {
    const float scale = vgetq_lane_f32(lut.scale, 0), folded = scale * kE4M3Rescale;
    const uint8x16_t raw[2] = {vld1q_u8(p), vld1q_u8(p + 16)};
    const uint8x16_t sign = vdupq_n_u8(0x80);
    const uint8x16_t nan = vorrq_u8(vceqq_u8(vorrq_u8(raw[0], sign), vdupq_n_u8(0xFF)),
                                    vceqq_u8(vorrq_u8(raw[1], sign), vdupq_n_u8(0xFF)));
    uint32_t folded_bits;
    memcpy(&folded_bits, &folded, 4);
    if (vmaxvq_u8(nan) != 0 || (folded_bits & 0x7F800000u) == 0x7F800000u) return fp8_from_table(p, 32, lut.scale);
    const float32x4_t s = vdupq_n_f32(folded);
    const uint32x4_t bits = vdupq_n_u32(kE4M3Bits);
    for (int h = 0; h < 2; ++h) {
      // Sign-extended and shifted left by 4 in 16 bits, then widened with a
      // further shift by 16: (b << 20) as kernel_table.h has it.
      const int8x16_t b = vreinterpretq_s8_u8(raw[h]);
      const int16x8_t lo = vshlq_n_s16(vmovl_s8(vget_low_s8(b)), 4), hi = vshlq_n_s16(vmovl_high_s8(b), 4);
      const int32x4_t wide[4] = {vshll_n_s16(vget_low_s16(lo), 16), vshll_high_n_s16(lo, 16),
                                 vshll_n_s16(vget_low_s16(hi), 16), vshll_high_n_s16(hi, 16)};
      for (int q = 0; q < 4; ++q)
        d.v[4 * h + q] = vmulq_f32(vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_s32(wide[q]), bits)), s);
    }
  } else {
    static const uint8_t kRepeat[4][16] = {{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
                                           {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
                                           {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
                                           {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};
    static const uint8_t kByteOfFloat[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    const uint8x16_t offsets = vld1q_u8(kByteOfFloat);
    uint8x16_t bytes = vld1q_u8(p);
    uint8x16_t low = vandq_u8(bytes, vdupq_n_u8(0x0F)), high = vshrq_n_u8(bytes, 4);
    uint8x16_t codes[2] = {vzip1q_u8(low, high), vzip2q_u8(low, high)};
    for (int k = 0; k < 8; ++k) {
      uint8x16_t c = vqtbl1q_u8(codes[k / 4], vld1q_u8(kRepeat[k % 4]));
      uint8x16_t at = vorrq_u8(vshlq_n_u8(c, 2), offsets);
      d.v[k] = vreinterpretq_f32_u8(vqtbl4q_u8(lut.bytes, at));
    }
  }
  return d;
}

template <WeightType kType>
struct RowSource {
  const uint8_t* data;
  const uint8_t* scales;
  size_t groups, tail, row_bytes;
  size_t scale_blocks;  // FP8Block: scale blocks per block row, ceil(cols / 128)

  explicit RowSource(const WeightView& w)
      : data(static_cast<const uint8_t*>(w.data)),
        scales(static_cast<const uint8_t*>(w.scales)),
        groups(w.cols / 32),
        tail(w.cols % 32),
        row_bytes(nibbles<kType>() ? w.cols / 2 : w.cols * (group_bytes<kType>() / 32)),
        scale_blocks((w.cols + kFp8BlockSize - 1) / kFp8BlockSize) {}

  Lut lut(size_t r, size_t g) const {
    Lut l;
    l.scale = vdupq_n_f32(0.0f);
    if constexpr (kType == WeightType::MXFP4) {
      // The group's row of the scaled table (kernel_table.h): four loads
      // instead of four multiplies.
      l.bytes = vld1q_u8_x4(reinterpret_cast<const uint8_t*>(kE2M1ByScale + 16 * size_t{scales[r * groups + g]}));
    } else if constexpr (kType == WeightType::Int4Group32) {
      uint16_t h;
      memcpy(&h, scales + 2 * (r * groups + g), 2);
      const float32x4_t scale = vreinterpretq_f32_u32(vdupq_n_u32(uint32_t{h} << 16));  // bf16 -> fp32, exact
      const float32x4x4_t values = vld1q_f32_x4(kInt4Signed);
      l.bytes.val[0] = vreinterpretq_u8_f32(vmulq_f32(values.val[0], scale));
      l.bytes.val[1] = vreinterpretq_u8_f32(vmulq_f32(values.val[1], scale));
      l.bytes.val[2] = vreinterpretq_u8_f32(vmulq_f32(values.val[2], scale));
      l.bytes.val[3] = vreinterpretq_u8_f32(vmulq_f32(values.val[3], scale));
    } else {
      if constexpr (kType == WeightType::FP8Block) {
        l.scale = vdupq_n_f32(
            reinterpret_cast<const float*>(scales)[(r / kFp8BlockSize) * scale_blocks + g / (kFp8BlockSize / 32)]);
      } else {
        (void)r, (void)g;
      }
      l.bytes.val[0] = l.bytes.val[1] = l.bytes.val[2] = l.bytes.val[3] = vdupq_n_u8(0);
    }
    return l;
  }

  // Group g of row r; g == groups is the partial last group (F32, BF16,
  // int8-row and FP8Block only), decoded from a zero-padded copy so padding
  // weights are +0 (FP8Block: from the table, padding set to +0).
  Group group(size_t r, size_t g) const {
    const uint8_t* p = data + r * row_bytes + g * group_bytes<kType>();
    if (g < groups) return decode<kType>(p, lut(r, g));
    if constexpr (kType == WeightType::FP8Block) return fp8_from_table(p, tail, lut(r, g).scale);
    alignas(16) uint8_t buf[group_bytes<kType>()];
    memset(buf, 0, sizeof buf);
    memcpy(buf, p, tail * (group_bytes<kType>() / 32));
    return decode<kType>(buf, lut(r, g));
  }

  size_t padded_groups() const { return groups + (tail ? 1 : 0); }

  // Software prefetch, once per 64-byte line, for a stream that advances R
  // rows together: the line kPrefetchBytes of weight traffic ahead, as in
  // matmul_avx2.cpp (not tuned on ARM hardware; none was at hand).
  void prefetch(size_t r, size_t g, size_t R) const {
    size_t o = g * group_bytes<kType>() + kPrefetchBytes / R;
    if (o >= row_bytes) o += (R - 1) * row_bytes;
    const char* p = reinterpret_cast<const char*>(data + r * row_bytes + o);
    if constexpr (group_bytes<kType>() >= 64) {
      for (size_t b = 0; b < group_bytes<kType>(); b += 64) prefetch_neon(p + b);
    } else {
      if (g % (64 / group_bytes<kType>()) == 0) prefetch_neon(p);
    }
  }
};

// The T = 1 path: decode fused into the loop, every weight byte streamed
// once. R rows advance together so each x load serves R rows; R = 2 keeps
// the 8 * R accumulators, the 8 x registers and the decoded group within
// AArch64's 32 vector registers.
template <WeightType kType, int R>
void fused_rows(const RowSource<kType>& src, const WeightView& w, const float* x, float* y, size_t r0) {
  size_t ng = src.padded_groups();
  float32x4_t a[R][8];
  for (int i = 0; i < R; ++i)
    for (int k = 0; k < 8; ++k) a[i][k] = vdupq_n_f32(0.0f);
  for (size_t g = 0; g < ng; ++g) {
    const float* xg = x + 32 * g;
#pragma GCC unroll 2
    for (int i = 0; i < R; ++i) {
      src.prefetch(r0 + i, g, R);
      Group d = src.group(r0 + i, g);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) a[i][k] = vfmaq_f32(a[i][k], d.v[k], vld1q_f32(xg + 4 * k));
    }
  }
  for (int i = 0; i < R; ++i) {
    float dot = lane_tree_neon(a[i]);
    if constexpr (kType == WeightType::Int8Row) dot = dot * f16_to_f32(static_cast<const uint16_t*>(w.scales)[r0 + i]);
    y[r0 + i] = dot;
  }
}

template <WeightType kType>
void rows_single(const WeightView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  RowSource<kType> src(w);
  size_t r = row_begin;
  for (; r + 2 <= row_end; r += 2) fused_rows<kType, 2>(src, w, x, y, r);
  for (; r < row_end; ++r) fused_rows<kType, 1>(src, w, x, y, r);
}

// Two decoded rows x one x row per pass (16 accumulators + 8 x registers):
// each x load feeds both rows.
void tile_2x1(const float* dec0, const float* dec1, const float* x, size_t n, float* acc0, float* acc1) {
  float32x4_t a[2][8];
  for (int k = 0; k < 8; ++k) {
    a[0][k] = vld1q_f32(acc0 + 4 * k);
    a[1][k] = vld1q_f32(acc1 + 4 * k);
  }
  for (size_t c = 0; c < n; c += 32) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      float32x4_t xv = vld1q_f32(x + c + 4 * k);
      a[0][k] = vfmaq_f32(a[0][k], vld1q_f32(dec0 + c + 4 * k), xv);
      a[1][k] = vfmaq_f32(a[1][k], vld1q_f32(dec1 + c + 4 * k), xv);
    }
  }
  for (int k = 0; k < 8; ++k) {
    vst1q_f32(acc0 + 4 * k, a[0][k]);
    vst1q_f32(acc1 + 4 * k, a[1][k]);
  }
}

void tile_1x1(const float* dec, const float* x, size_t n, float* acc) {
  float32x4_t a[8];
  for (int k = 0; k < 8; ++k) a[k] = vld1q_f32(acc + 4 * k);
  for (size_t c = 0; c < n; c += 32) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) a[k] = vfmaq_f32(a[k], vld1q_f32(dec + c + 4 * k), vld1q_f32(x + c + 4 * k));
  }
  for (int k = 0; k < 8; ++k) vst1q_f32(acc + 4 * k, a[k]);
}

// T > 1: decode kRowTile rows x kColBlock columns once, run all T x rows over
// them; accumulators persist (exactly) in scratch across column blocks.
template <WeightType kType>
void rows_batched(const WeightView& w, const float* x, size_t xs, size_t T, float* y, size_t row_begin,
                  size_t row_end, float* scratch) {
  RowSource<kType> src(w);
  float* dec = scratch;
  float* acc = scratch + kScratchFixed;
  size_t padded_cols = src.padded_groups() * 32;
  for (size_t rb = row_begin; rb < row_end; rb += kRowTile) {
    size_t R = row_end - rb < kRowTile ? row_end - rb : kRowTile;
    memset(acc, 0, R * T * 32 * sizeof(float));
    for (size_t c0 = 0; c0 < padded_cols; c0 += kColBlock) {
      size_t n = padded_cols - c0 < kColBlock ? padded_cols - c0 : kColBlock;
      for (size_t i = 0; i < R; ++i) {
        for (size_t g = 0; g < n / 32; ++g) {
          Group d = src.group(rb + i, c0 / 32 + g);
          for (int k = 0; k < 8; ++k) vst1q_f32(dec + i * kColBlock + 32 * g + 4 * k, d.v[k]);
        }
      }
      for (size_t t = 0; t < T; ++t) {
        const float* xt = x + t * xs + c0;
        size_t i = 0;
        for (; i + 2 <= R; i += 2)
          tile_2x1(dec + i * kColBlock, dec + (i + 1) * kColBlock, xt, n, acc + (i * T + t) * 32,
                   acc + ((i + 1) * T + t) * 32);
        for (; i < R; ++i) tile_1x1(dec + i * kColBlock, xt, n, acc + (i * T + t) * 32);
      }
    }
    for (size_t i = 0; i < R; ++i) {
      float scale = 1.0f;
      if constexpr (kType == WeightType::Int8Row) scale = f16_to_f32(static_cast<const uint16_t*>(w.scales)[rb + i]);
      for (size_t t = 0; t < T; ++t) {
        const float* a = acc + (i * T + t) * 32;
        float32x4_t v[8];
        for (int k = 0; k < 8; ++k) v[k] = vld1q_f32(a + 4 * k);
        float dot = lane_tree_neon(v);
        if constexpr (kType == WeightType::Int8Row) dot = dot * scale;
        y[t * w.rows + rb + i] = dot;
      }
    }
  }
}

template <WeightType kType>
void rows(const WeightView& w, const float* x, size_t xs, size_t T, float* y, size_t row_begin, size_t row_end,
          float* scratch) {
  if (T == 1) {
    rows_single<kType>(w, x, y, row_begin, row_end);
  } else {
    rows_batched<kType>(w, x, xs, T, y, row_begin, row_end, scratch);
  }
}

}  // namespace

void matmul_rows_neon(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y, size_t row_begin,
                      size_t row_end, float* scratch) {
  switch (w.type) {
    case WeightType::F32: return rows<WeightType::F32>(w, x, x_stride, T, y, row_begin, row_end, scratch);
    case WeightType::BF16: return rows<WeightType::BF16>(w, x, x_stride, T, y, row_begin, row_end, scratch);
    case WeightType::Int8Row: return rows<WeightType::Int8Row>(w, x, x_stride, T, y, row_begin, row_end, scratch);
    case WeightType::MXFP4: return rows<WeightType::MXFP4>(w, x, x_stride, T, y, row_begin, row_end, scratch);
    case WeightType::FP8Block: return rows<WeightType::FP8Block>(w, x, x_stride, T, y, row_begin, row_end, scratch);
    case WeightType::Int4Group32:
      return rows<WeightType::Int4Group32>(w, x, x_stride, T, y, row_begin, row_end, scratch);
  }
}

}  // namespace deltafin::kernels_detail
