// AVX2 product (compiled with -mavx2 -mfma -mf16c; entered only when
// isa_supported(Isa::Avx2)). The 32 canonical lane accumulators of one output
// are four ymm registers (lanes 0-7, 8-15, 16-23, 24-31), so a column group of
// 32 is four _mm256_fmadd_ps, each lane exactly the scalar std::fma.
// See kernel_table.h for what this file may and may not use.
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"  // immintrin.h, lane_tree256
#include "util/numeric.h"  // f16_to_f32 (out of line, baseline code)

namespace deltafin::kernels_detail {

namespace {

struct Group {
  __m256 v[4];  // columns 0-7, 8-15, 16-23, 24-31
};

// MXFP4 products of T > 1 x rows take the fused loop (rows_fused_mxfp4),
// kAvx2FusedRun x rows per pass over the weights: 3 did best of 2, 3 and 4
// (1.45x, 1.6x and 1.6x the per-row speed of T = 1 at T = 64; 4 spills).
constexpr size_t kAvx2FusedRun = 3;

template <WeightType kType>
constexpr size_t group_bytes() {
  return kType == WeightType::F32                                   ? 128
         : kType == WeightType::BF16                                ? 64
         : kType == WeightType::Int8Row || kType == WeightType::FP8Block ? 32
                                                                    : 16;  // MXFP4, Int4Group32
}

// Whether f is finite: its exponent field is not all ones.
bool finite(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return (bits & 0x7F800000u) != 0x7F800000u;
}

// FP8Block's 32 codes at p: e4m3 x 2^-120 by the bit placement of
// kernel_table.h (kE4M3Bits), exact, times `folded` (the group's scale x
// 2^120, finite), the definition's one rounding. No code may be NaN.
Group decode_fp8_unchecked(const uint8_t* p, __m256 folded) {
  const __m256i bits = _mm256_set1_epi32(static_cast<int>(kE4M3Bits));
  Group d;
  for (int k = 0; k < 4; ++k) {
    __m256i b = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * k)));
    d.v[k] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(b, 20), bits)), folded);
  }
  return d;
}

// Whether any of the n (a multiple of 32) codes at p is NaN (0x7F, 0xFF).
bool any_nan_code(const uint8_t* p, size_t n) {
  const __m256i sign = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi8(-1);
  __m256i nan = _mm256_setzero_si256();
  for (size_t i = 0; i < n; i += 32) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    nan = _mm256_or_si256(nan, _mm256_cmpeq_epi8(_mm256_or_si256(raw, sign), ones));
  }
  return _mm256_movemask_epi8(nan) != 0;
}

// FP8Block's 32 codes at p, times the group's scale, from the exact table:
// the decode of a group that holds a NaN code (and of a row's partial last
// group, whose padding columns must be +0).
Group fp8_from_table(const uint8_t* p, size_t n, float scale) {
  alignas(32) float f[32];
  for (size_t i = 0; i < 32; ++i) f[i] = i < n ? kE4M3[p[i]] * scale : 0.0f;
  Group d;
  for (int k = 0; k < 4; ++k) d.v[k] = _mm256_load_ps(f + 8 * k);
  return d;
}

// Decodes the 32 weights at p exactly. For MXFP4, mag is the e2m1 magnitude
// table (8 entries) already multiplied by the group's scale (exact); each
// 8-column quarter broadcasts its 4 packed bytes, shifts lane i right by 4i so
// its nibble sits in bits 0-3, looks the magnitude up by bits 0-2 and moves
// bit 3 into the sign (code 8 gives -0.0, as the definition says). For
// FP8Block and Int4Group32, mag is the group's scale in every lane. FP8Block:
// e4m3 x 2^-120 by the bit placement of kernel_table.h (kE4M3Bits), exact,
// times the scale x 2^120: the one rounding of the definition. Int4Group32: each quarter is one
// word, columns in nibble order; u ^ 8 read as a signed 4-bit number is
// u - 8, so shifting nibble i to the top and back arithmetically gives q,
// and q times the bf16 scale is exact.
template <WeightType kType>
inline Group decode(const uint8_t* p, __m256 mag) {
  Group d;
  if constexpr (kType == WeightType::F32) {
    (void)mag;
    for (int k = 0; k < 4; ++k) d.v[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(p) + 8 * k);
  } else if constexpr (kType == WeightType::BF16) {
    (void)mag;
    for (int k = 0; k < 4; ++k) {
      __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k)));
      d.v[k] = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    }
  } else if constexpr (kType == WeightType::Int8Row) {
    (void)mag;
    for (int k = 0; k < 4; ++k) {
      __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * k)));
      d.v[k] = _mm256_cvtepi32_ps(q);
    }
  } else if constexpr (kType == WeightType::FP8Block) {
    const float scale = _mm256_cvtss_f32(mag), folded = scale * kE4M3Rescale;
    if (any_nan_code(p, 32) || !finite(folded)) return fp8_from_table(p, 32, scale);
    return decode_fp8_unchecked(p, _mm256_set1_ps(folded));
  } else if constexpr (kType == WeightType::Int4Group32) {
    const __m256i to_top = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
    for (int k = 0; k < 4; ++k) {
      int word;
      memcpy(&word, p + 4 * k, 4);
      __m256i flipped = _mm256_xor_si256(_mm256_set1_epi32(word), _mm256_set1_epi32(static_cast<int>(0x88888888u)));
      __m256i q = _mm256_srai_epi32(_mm256_sllv_epi32(flipped, to_top), 28);
      d.v[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), mag);
    }
  } else {
    const __m256i right = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i left = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
    const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    for (int k = 0; k < 4; ++k) {
      int word;
      memcpy(&word, p + 4 * k, 4);
      __m256i packed = _mm256_set1_epi32(word);
      __m256 m = _mm256_permutevar8x32_ps(mag, _mm256_srlv_epi32(packed, right));
      __m256i s = _mm256_and_si256(_mm256_sllv_epi32(packed, left), sign);
      d.v[k] = _mm256_xor_ps(m, _mm256_castsi256_ps(s));
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
        row_bytes(kType == WeightType::MXFP4 || kType == WeightType::Int4Group32
                      ? w.cols / 2
                      : w.cols * (group_bytes<kType>() / 32)),
        scale_blocks((w.cols + kFp8BlockSize - 1) / kFp8BlockSize) {}

  // FP8Block's scale for group g of row r (a 128-column block holds 4 groups).
  float fp8_scale(size_t r, size_t g) const {
    return reinterpret_cast<const float*>(scales)[(r / kFp8BlockSize) * scale_blocks + g / (kFp8BlockSize / 32)];
  }

  // FP8Block: whether the 128-column block of groups g .. g + 3 of row r
  // (g a multiple of 4, all four whole) can take decode_fp8_unchecked: no NaN
  // code and a scale whose x 2^120 is finite, which goes to *folded. Checked
  // once per row and block instead of per group.
  bool fp8_block_unchecked(size_t r, size_t g, __m256* folded) const {
    const float f = fp8_scale(r, g) * kE4M3Rescale;
    *folded = _mm256_set1_ps(f);
    return finite(f) && !any_nan_code(data + r * row_bytes + 32 * g, kFp8BlockSize);
  }

  __m256 mag(size_t r, size_t g) const {
    if constexpr (kType == WeightType::MXFP4) {
      return _mm256_load_ps(kE2M1ByScale + 16 * size_t{scales[r * groups + g]});  // codes 0-7 of the scaled table
    } else if constexpr (kType == WeightType::FP8Block) {
      return _mm256_set1_ps(fp8_scale(r, g));
    } else if constexpr (kType == WeightType::Int4Group32) {
      uint16_t h;
      memcpy(&h, scales + 2 * (r * groups + g), 2);
      return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(uint32_t{h} << 16)));  // bf16 -> fp32, exact
    } else {
      (void)r, (void)g;
      return _mm256_setzero_ps();  // unused by the other types' decode
    }
  }

  // Group g of row r; g == groups is the partial last group (F32, BF16,
  // int8-row and FP8Block only), decoded from a zero-padded copy so padding
  // weights are +0 (FP8Block: from the table, padding set to +0).
  Group group(size_t r, size_t g) const {
    const uint8_t* p = data + r * row_bytes + g * group_bytes<kType>();
    if (g < groups) return decode<kType>(p, mag(r, g));
    if constexpr (kType == WeightType::FP8Block) return fp8_from_table(p, tail, fp8_scale(r, g));
    alignas(32) uint8_t buf[group_bytes<kType>()];
    memset(buf, 0, sizeof buf);
    memcpy(buf, p, tail * (group_bytes<kType>() / 32));
    return decode<kType>(buf, mag(r, g));
  }

  size_t padded_groups() const { return groups + (tail ? 1 : 0); }

  // Software prefetch, once per cache line, for a stream that advances R
  // rows together (rows r0..r0+R-1, then the next R): the line kPrefetchBytes
  // of weight traffic ahead, i.e. kPrefetchBytes / R further along row r, or
  // where that falls past the row's end, the same place in row r + R.
  // Prefetching past the end of the matrix is harmless.
  void prefetch(size_t r, size_t g, size_t R) const {
    size_t o = g * group_bytes<kType>() + kPrefetchBytes / R;
    if (o >= row_bytes) o += (R - 1) * row_bytes;
    const char* p = reinterpret_cast<const char*>(data + r * row_bytes + o);
    if constexpr (group_bytes<kType>() >= 64) {
      for (size_t b = 0; b < group_bytes<kType>(); b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
    } else {
      if (g % (64 / group_bytes<kType>()) == 0) _mm_prefetch(p, _MM_HINT_T0);
    }
  }
};

// The T = 1 path, and small T for F32/BF16/int8-row/FP8Block (kFusedMaxRows): the
// decode fused into the loop, every weight byte streamed once per run of TT x
// rows (xs floats apart; y rows ys apart). R rows advance together so each x
// load serves R rows (x of 12288 fp32 columns no longer fits in L1); R x TT =
// 2 keeps the accumulators, the x registers and the decode temporaries within
// the 16 ymm registers.
template <WeightType kType, int R, int TT>
void fused_rows(const RowSource<kType>& src, const WeightView& w, const float* x, size_t xs, float* y, size_t ys,
                size_t r0) {
  size_t ng = src.padded_groups();
  __m256 a[R][TT][4];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < TT; ++t)
      for (int k = 0; k < 4; ++k) a[i][t][k] = _mm256_setzero_ps();
  // Row i's decoded group g into its accumulators.
  auto accumulate = [&](const Group& d, int i, size_t g) {
#pragma GCC unroll 4
    for (int t = 0; t < TT; ++t) {
      const float* xg = x + t * xs + 32 * g;
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) a[i][t][k] = _mm256_fmadd_ps(d.v[k], _mm256_load_ps(xg + 8 * k), a[i][t][k]);
    }
  };
  size_t g = 0;
  if constexpr (kType == WeightType::FP8Block) {
    // Whole 128-column scale blocks: the NaN and scale checks once per row
    // and block, then four branch-free group decodes; a block that fails
    // them decodes group by group. Groups stay in column order per row.
    for (; g + 4 <= src.groups; g += 4) {
      __m256 folded[R];
      bool unchecked = true;
      for (int i = 0; i < R; ++i) unchecked &= src.fp8_block_unchecked(r0 + i, g, &folded[i]);
      if (unchecked) {
        for (size_t k = g; k < g + 4; ++k) {
#pragma GCC unroll 2
          for (int i = 0; i < R; ++i) {
            src.prefetch(r0 + i, k, R);
            accumulate(decode_fp8_unchecked(src.data + (r0 + i) * src.row_bytes + 32 * k, folded[i]), i, k);
          }
        }
      } else {
        for (size_t k = g; k < g + 4; ++k)
          for (int i = 0; i < R; ++i) accumulate(src.group(r0 + i, k), i, k);
      }
    }
  }
  for (; g < ng; ++g) {
#pragma GCC unroll 2
    for (int i = 0; i < R; ++i) {
      src.prefetch(r0 + i, g, R);
      accumulate(src.group(r0 + i, g), i, g);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < TT; ++t) {
      float dot = lane_tree256(a[i][t][0], a[i][t][1], a[i][t][2], a[i][t][3]);
      if constexpr (kType == WeightType::Int8Row) dot = dot * f16_to_f32(static_cast<const uint16_t*>(w.scales)[r0 + i]);
      y[t * ys + r0 + i] = dot;
    }
}

template <WeightType kType>
void rows_single(const WeightView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  RowSource<kType> src(w);
  size_t r = row_begin;
  for (; r + 2 <= row_end; r += 2) fused_rows<kType, 2, 1>(src, w, x, 0, y, 0, r);
  for (; r < row_end; ++r) fused_rows<kType, 1, 1>(src, w, x, 0, y, 0, r);
}

// F32/BF16/int8-row/FP8Block products of up to this many x rows take the fused
// loop (rows_small_batch), longer ones the batched path: below that the batched
// path's decode into scratch cost more than it saved (T = 2 ran at 0.88x the
// per-row speed of T = 1 for BF16, 0.76x for int8-row; fused: 1.65x and 1.8x),
// at T = 8 it is 1.3x faster than the fused loop.
constexpr size_t kFusedMaxRows = 4;

// Runs of two x rows, one weight row at a time (R x TT = 2).
template <WeightType kType>
void rows_small_batch(const WeightView& w, const float* x, size_t xs, size_t T, float* y, size_t row_begin,
                      size_t row_end) {
  RowSource<kType> src(w);
  for (size_t t = 0; t < T; t += 2) {
    for (size_t r = row_begin; r < row_end; ++r) {
      if (T - t >= 2) {
        fused_rows<kType, 1, 2>(src, w, x + t * xs, xs, y + t * w.rows, w.rows, r);
      } else {
        fused_rows<kType, 1, 1>(src, w, x + t * xs, xs, y + t * w.rows, w.rows, r);
      }
    }
  }
}

// MXFP4 (and Int4Group32, whose decode costs the same: a broadcast, shifts
// and a multiply per quarter) at T > 1: each group decoded once in registers
// and used by TT x rows, instead of decoded into the scratch block. The scratch decode costs
// more than the fmas it feeds until T is large (T = 2 ran at 0.68x the per-row
// speed of T = 1, T = 64 at 1.6x); decoding again for every run of three x
// rows is as fast at T = 64 and faster below. This is fused_rows with one
// weight row and TT x rows: TT x 4 accumulators and the decoded group nearly
// fill the 16 ymm registers at TT = 3.
template <WeightType kType>
void rows_fused_nibbles(const WeightView& w, const float* x, size_t xs, size_t T, float* y, size_t row_begin,
                        size_t row_end) {
  static_assert(kAvx2FusedRun == 3, "the runs below are three x rows");
  RowSource<kType> src(w);
  for (size_t t = 0; t < T; t += kAvx2FusedRun) {
    const float* xt = x + t * xs;
    float* yt = y + t * w.rows;
    const size_t n = T - t < kAvx2FusedRun ? T - t : kAvx2FusedRun;
    for (size_t r = row_begin; r < row_end; ++r) {
      switch (n) {
        case 3: fused_rows<kType, 1, 3>(src, w, xt, xs, yt, w.rows, r); break;
        case 2: fused_rows<kType, 1, 2>(src, w, xt, xs, yt, w.rows, r); break;
        default: fused_rows<kType, 1, 1>(src, w, xt, xs, yt, w.rows, r); break;
      }
    }
  }
}

// Two decoded rows x one x row per pass (8 accumulators + 4 x registers fit
// the 16 ymm registers): each x load feeds both rows.
void tile_2x1(const float* dec0, const float* dec1, const float* x, size_t n, float* acc0, float* acc1) {
  __m256 a[2][4];
  for (int k = 0; k < 4; ++k) {
    a[0][k] = _mm256_loadu_ps(acc0 + 8 * k);
    a[1][k] = _mm256_loadu_ps(acc1 + 8 * k);
  }
  for (size_t c = 0; c < n; c += 32) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      __m256 xv = _mm256_loadu_ps(x + c + 8 * k);
      a[0][k] = _mm256_fmadd_ps(_mm256_loadu_ps(dec0 + c + 8 * k), xv, a[0][k]);
      a[1][k] = _mm256_fmadd_ps(_mm256_loadu_ps(dec1 + c + 8 * k), xv, a[1][k]);
    }
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(acc0 + 8 * k, a[0][k]);
    _mm256_storeu_ps(acc1 + 8 * k, a[1][k]);
  }
}

void tile_1x1(const float* dec, const float* x, size_t n, float* acc) {
  __m256 a[4];
  for (int k = 0; k < 4; ++k) a[k] = _mm256_loadu_ps(acc + 8 * k);
  for (size_t c = 0; c < n; c += 32) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) a[k] = _mm256_fmadd_ps(_mm256_loadu_ps(dec + c + 8 * k), _mm256_loadu_ps(x + c + 8 * k), a[k]);
  }
  for (int k = 0; k < 4; ++k) _mm256_storeu_ps(acc + 8 * k, a[k]);
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
          for (int k = 0; k < 4; ++k) _mm256_storeu_ps(dec + i * kColBlock + 32 * g + 8 * k, d.v[k]);
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
        float dot = lane_tree256(_mm256_loadu_ps(a), _mm256_loadu_ps(a + 8), _mm256_loadu_ps(a + 16),
                                 _mm256_loadu_ps(a + 24));
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
  } else if constexpr (kType == WeightType::MXFP4 || kType == WeightType::Int4Group32) {
    rows_fused_nibbles<kType>(w, x, xs, T, y, row_begin, row_end);
  } else if (T <= kFusedMaxRows) {
    rows_small_batch<kType>(w, x, xs, T, y, row_begin, row_end);
  } else {
    rows_batched<kType>(w, x, xs, T, y, row_begin, row_end, scratch);
  }
}

}  // namespace

void matmul_rows_avx2(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y, size_t row_begin,
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
