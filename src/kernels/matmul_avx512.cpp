// AVX-512 product (compiled with -mavx512f -mavx512bw -mavx512vl; entered only
// when isa_supported(Isa::Avx512)). The 32 canonical lane accumulators of one
// output are two zmm registers: lo = lanes 0-15, hi = lanes 16-31, so a column
// group of 32 is two _mm512_fmadd_ps, each lane exactly the scalar std::fma.
// See kernel_table.h for what this file may and may not use.
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_avx512.h"  // immintrin.h, lane_tree512
#include "util/numeric.h"  // f16_to_f32 (out of line, baseline code)

namespace deltafin::kernels_detail {

namespace {

// F32/BF16/int8-row/FP8Block products of up to this many x rows take the fused
// loop (rows_small_batch), longer ones the batched path. int8-row stops
// earlier: its decode (widen, convert) is dearer, and at T = 8 the batched
// path was 1.3x faster for it while BF16 was still 1.05-1.1x faster fused.
// FP8Block's decode (widen, shift, mask, multiply) is dearer still.
template <WeightType kType>
constexpr size_t fused_max_rows() {
  return kType == WeightType::Int8Row || kType == WeightType::FP8Block ? 4 : 8;
}

// One decoded 32-column group: columns 0-15 and 16-31.
struct Group {
  __m512 lo, hi;
};

template <WeightType kType>
constexpr size_t group_bytes() {
  return kType == WeightType::F32                                   ? 128
         : kType == WeightType::BF16                                ? 64
         : kType == WeightType::Int8Row || kType == WeightType::FP8Block ? 32
                                                                    : 16;  // MXFP4, Int4Group32
}

// The types whose bytes are two 4-bit codes each, low nibble first, which
// the even/odd loops (fused_tile_nibbles) decode with a 16-entry table.
template <WeightType kType>
constexpr bool nibbles() {
  return kType == WeightType::MXFP4 || kType == WeightType::Int4Group32;
}

// FP8Block's first n codes at p times the group's scale, from the exact table
// (padding +0): the decode of a group that holds a NaN code and of a row's
// partial last group.
Group fp8_from_table(const uint8_t* p, size_t n, float scale) {
  alignas(64) float f[32];
  for (size_t i = 0; i < 32; ++i) f[i] = i < n ? kE4M3[p[i]] * scale : 0.0f;
  return {_mm512_load_ps(f), _mm512_load_ps(f + 16)};
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
inline Group decode_fp8_unchecked(const uint8_t* p, __m512 folded) {
  const __m512i bits = _mm512_set1_epi32(static_cast<int>(kE4M3Bits));
  const __m512i lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  return {_mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(lo, 20), bits)), folded),
          _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(hi, 20), bits)), folded)};
}

// Whether any of the n (a multiple of 32) codes at p is NaN (0x7F, 0xFF).
inline bool any_nan_code(const uint8_t* p, size_t n) {
  const __m256i sign = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi8(-1);
  __mmask32 nan = 0;
  for (size_t i = 0; i < n; i += 32)
    nan |= _mm256_cmpeq_epi8_mask(_mm256_or_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), sign),
                                  ones);
  return nan != 0;
}

// decode_fp8_unchecked for any group: a group holding a NaN code, or whose
// scale x 2^120 overflows, takes the table.
inline Group decode_fp8(const uint8_t* p, float scale) {
  const float folded = scale * kE4M3Rescale;
  if (any_nan_code(p, 32) || !finite(folded)) return fp8_from_table(p, 32, scale);
  return decode_fp8_unchecked(p, _mm512_set1_ps(folded));
}

// Decodes the 32 weights at p exactly (F32, BF16, int8-row; FP8Block has
// decode_fp8, MXFP4 and Int4Group32 their even/odd decode in
// fused_tile_nibbles).
template <WeightType kType>
inline Group decode(const uint8_t* p) {
  static_assert(!nibbles<kType>() && kType != WeightType::FP8Block, "decoded elsewhere");
  if constexpr (kType == WeightType::F32) {
    return {_mm512_loadu_ps(p), _mm512_loadu_ps(p + 64)};
  } else if constexpr (kType == WeightType::BF16) {
    __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(lo, 16)), _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16))};
  } else {
    __m512i lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    __m512i hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
    return {_mm512_cvtepi32_ps(lo), _mm512_cvtepi32_ps(hi)};
  }
}

template <WeightType kType>
struct RowSource {
  const uint8_t* data;    // start of the matrix
  const uint8_t* scales;  // the scales, as bytes
  size_t cols, groups, tail, row_bytes;
  size_t scale_blocks;  // FP8Block: scale blocks per block row, ceil(cols / 128)

  explicit RowSource(const WeightView& w)
      : data(static_cast<const uint8_t*>(w.data)),
        scales(static_cast<const uint8_t*>(w.scales)),
        cols(w.cols),
        groups(w.cols / 32),
        tail(w.cols % 32),
        row_bytes(nibbles<kType>() ? w.cols / 2 : w.cols * (group_bytes<kType>() / 32)),
        scale_blocks((w.cols + kFp8BlockSize - 1) / kFp8BlockSize) {}

  // FP8Block's scale for group g of row r (a 128-column block holds 4 groups).
  const float* fp8_scale(size_t r, size_t g) const {
    return reinterpret_cast<const float*>(scales) + (r / kFp8BlockSize) * scale_blocks + g / (kFp8BlockSize / 32);
  }

  // The 16 values of group g of row r's codes: MXFP4's row of the scaled
  // e2m1 table; Int4Group32's u - 8 times the bf16 scale (exact).
  __m512 lut(size_t r, size_t g) const {
    if constexpr (kType == WeightType::MXFP4) {
      return _mm512_load_ps(kE2M1ByScale + 16 * size_t{scales[r * groups + g]});
    } else {
      static_assert(kType == WeightType::Int4Group32, "only the nibble types have a table");
      uint16_t h;
      memcpy(&h, scales + 2 * (r * groups + g), 2);
      const __m512 scale = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(uint32_t{h} << 16)));
      return _mm512_mul_ps(_mm512_load_ps(kInt4Signed), scale);
    }
  }

  // FP8Block: whether the 128-column block of groups g .. g + 3 of row r
  // (g a multiple of 4, all four whole) can take decode_fp8_unchecked: no NaN
  // code and a scale whose x 2^120 is finite, which goes to *folded. Checked
  // once per row and block instead of per group.
  bool fp8_block_unchecked(size_t r, size_t g, __m512* folded) const {
    const float f = *fp8_scale(r, g) * kE4M3Rescale;
    *folded = _mm512_set1_ps(f);
    return finite(f) && !any_nan_code(data + r * row_bytes + 32 * g, kFp8BlockSize);
  }

  // Group g of row r; g == groups is the partial last group (cols % 32 != 0,
  // never MXFP4 or Int4Group32), decoded from a zero-padded copy so padding
  // weights are +0 (FP8Block: from the table, padding set to +0).
  Group group(size_t r, size_t g) const {
    const uint8_t* p = data + r * row_bytes + g * group_bytes<kType>();
    if constexpr (kType == WeightType::FP8Block) {
      return g < groups ? decode_fp8(p, *fp8_scale(r, g)) : fp8_from_table(p, tail, *fp8_scale(r, g));
    } else {
      if (g < groups) return decode<kType>(p);
      alignas(64) uint8_t buf[group_bytes<kType>()];
      memset(buf, 0, sizeof buf);
      memcpy(buf, p, tail * (group_bytes<kType>() / 32));
      return decode<kType>(buf);
    }
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

// The T = 1 path, and small T for F32/BF16/int8-row/FP8Block (fused_max_rows): y = W x
// with the decode fused into the loop, so every weight byte is streamed once
// per run of TT x rows (xs floats apart; y rows ys apart). R rows advance
// together, one group at a time: each x load then serves R rows, which
// matters once x no longer fits in L1 (12288 columns of fp32 is 48 KiB) and
// would otherwise be re-read from L2 for every row. x is padded with -0.0f.
template <WeightType kType, int R, int TT>
void fused_rows(const RowSource<kType>& src, const WeightView& w, const float* x, size_t xs, float* y, size_t ys,
                size_t r0) {
  size_t ng = src.padded_groups();
  __m512 lo[R][TT], hi[R][TT];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int t = 0; t < TT; ++t) lo[i][t] = _mm512_setzero_ps(), hi[i][t] = _mm512_setzero_ps();
  // The R rows' decoded group g into the accumulators.
  auto accumulate = [&](const Group (&d)[R], size_t g) {
#pragma GCC unroll 4
    for (int t = 0; t < TT; ++t) {
      __m512 x0 = _mm512_load_ps(x + t * xs + 32 * g), x1 = _mm512_load_ps(x + t * xs + 32 * g + 16);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        lo[i][t] = _mm512_fmadd_ps(d[i].lo, x0, lo[i][t]);
        hi[i][t] = _mm512_fmadd_ps(d[i].hi, x1, hi[i][t]);
      }
    }
  };
  size_t g = 0;
  if constexpr (kType == WeightType::FP8Block) {
    // Whole 128-column scale blocks: the NaN and scale checks once per row
    // and block (per group they cost a third of the loop's time), then four
    // branch-free group decodes; a block that fails them decodes group by
    // group. The groups still go in column order, so the lanes see the
    // canonical sequence either way.
    for (; g + 4 <= src.groups; g += 4) {
      __m512 folded[R];
      bool unchecked = true;
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) unchecked &= src.fp8_block_unchecked(r0 + i, g, &folded[i]);
      if (unchecked) {
#pragma GCC unroll 4
        for (size_t k = g; k < g + 4; ++k) {
          Group d[R];
#pragma GCC unroll 4
          for (int i = 0; i < R; ++i) {
            src.prefetch(r0 + i, k, R);
            d[i] = decode_fp8_unchecked(src.data + (r0 + i) * src.row_bytes + 32 * k, folded[i]);
          }
          accumulate(d, k);
        }
      } else {
        for (size_t k = g; k < g + 4; ++k) {
          Group d[R];
          for (int i = 0; i < R; ++i) d[i] = src.group(r0 + i, k);
          accumulate(d, k);
        }
      }
    }
  }
  for (; g < ng; ++g) {
    Group d[R];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      src.prefetch(r0 + i, g, R);
      d[i] = src.group(r0 + i, g);
    }
    accumulate(d, g);
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < TT; ++t) {
      float dot = lane_tree512(lo[i][t], hi[i][t]);
      if constexpr (kType == WeightType::Int8Row) dot = dot * f16_to_f32(static_cast<const uint16_t*>(w.scales)[r0 + i]);
      y[t * ys + r0 + i] = dot;
    }
}

template <WeightType kType>
void rows_single(const WeightView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  RowSource<kType> src(w);
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) fused_rows<kType, 4, 1>(src, w, x, 0, y, 0, r);
  for (; r < row_end; ++r) fused_rows<kType, 1, 1>(src, w, x, 0, y, 0, r);
}

// F32/BF16/int8-row/FP8Block at 2 <= T <= fused_max_rows: the fused loop over runs of up
// to four x rows (2 rows x 4 x rows x 2 = 16 accumulators). Below about eight
// x rows the batched path's decode into scratch and its reloads cost more
// than they save (T = 2 ran no faster per row than T = 1).
template <int TT, WeightType kType>
void fused_run(const RowSource<kType>& src, const WeightView& w, const float* x, size_t xs, float* y,
               size_t row_begin, size_t row_end) {
  size_t r = row_begin;
  for (; r + 2 <= row_end; r += 2) fused_rows<kType, 2, TT>(src, w, x, xs, y, w.rows, r);
  if (r < row_end) fused_rows<kType, 1, TT>(src, w, x, xs, y, w.rows, r);
}

template <WeightType kType>
void rows_small_batch(const WeightView& w, const float* x, size_t xs, size_t T, float* y, size_t row_begin,
                      size_t row_end) {
  RowSource<kType> src(w);
  for (size_t t = 0; t < T; t += 4) {
    const float* xt = x + t * xs;
    float* yt = y + t * w.rows;
    switch (T - t < 4 ? T - t : 4) {
      case 4: fused_run<4>(src, w, xt, xs, yt, row_begin, row_end); break;
      case 3: fused_run<3>(src, w, xt, xs, yt, row_begin, row_end); break;
      case 2: fused_run<2>(src, w, xt, xs, yt, row_begin, row_end); break;
      default: fused_run<1>(src, w, xt, xs, yt, row_begin, row_end); break;
    }
  }
}

// Writes x's T rows (xs floats apart) into x_split, de-interleaved as the
// MXFP4 and Int4Group32 loops below want them: per 32-column group, the even columns then the
// odd ones.
void split_even_odd(const float* x, size_t xs, size_t T, size_t groups, float* x_split) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (size_t t = 0; t < T; ++t)
    for (size_t g = 0; g < groups; ++g) {
      __m512 a = _mm512_load_ps(x + t * xs + 32 * g), b = _mm512_load_ps(x + t * xs + 32 * g + 16);
      _mm512_store_ps(x_split + t * xs + 32 * g, _mm512_permutex2var_ps(a, even, b));
      _mm512_store_ps(x_split + t * xs + 32 * g + 16, _mm512_permutex2var_ps(a, odd, b));
    }
}

// MXFP4 and Int4Group32 (whose bytes are packed alike, two codes each, low
// nibble first; only the 16-entry table differs) at T > 1: the T = 1 loop's
// even/odd decode, done once per group in registers and used by TT x rows,
// instead of a decode into the scratch block as the other types do. That decode (six shuffles and two stores per group)
// cost more than the fmas it fed until T reached about 8, so T = 2 ran slower
// per row than T = 1; decoding again for every run of four x rows is cheaper
// up to T = 16 and as fast beyond (bench/results/2026-12-03-kernels-roofline.md).
// Blocking the columns so a run's x stays in L1 made it 1.3x slower: the row
// streams lost their prefetch. Accumulators: R rows x TT x rows x (even, odd).
template <WeightType kType, int R, int TT>
void fused_tile_nibbles(const RowSource<kType>& src, const float* x_split, size_t xs, float* y, size_t y_stride,
                        size_t r0) {
  const __m512i to_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i to_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const size_t ng = src.groups;
  __m512 even[R][TT], odd[R][TT];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int t = 0; t < TT; ++t) even[i][t] = _mm512_setzero_ps(), odd[i][t] = _mm512_setzero_ps();
  for (size_t g = 0; g < ng; ++g) {
    __m512 we[R], wo[R];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      size_t r = r0 + i;
      src.prefetch(r, g, R);
      __m512 lut = src.lut(r, g);
      __m512i bytes =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src.data + r * src.row_bytes + 16 * g)));
      we[i] = _mm512_permutexvar_ps(bytes, lut);
      wo[i] = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), lut);
    }
#pragma GCC unroll 4
    for (int t = 0; t < TT; ++t) {
      __m512 xe = _mm512_load_ps(x_split + t * xs + 32 * g), xo = _mm512_load_ps(x_split + t * xs + 32 * g + 16);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        even[i][t] = _mm512_fmadd_ps(we[i], xe, even[i][t]);
        odd[i][t] = _mm512_fmadd_ps(wo[i], xo, odd[i][t]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < TT; ++t)
      y[t * y_stride + r0 + i] = lane_tree512(_mm512_permutex2var_ps(even[i][t], to_lo, odd[i][t]),
                                              _mm512_permutex2var_ps(even[i][t], to_hi, odd[i][t]));
}

// MXFP4 and Int4Group32, T = 1 (fused_tile_nibbles above, one x row): a natural-order decode
// costs six port-5 shuffles per group (unpack x2, widen x2, permute x2) and
// capped the stream near half the memory bandwidth. Here the accumulators hold the even columns (canonical
// lanes 0, 2, ..., 30) and the odd ones (lanes 1, 3, ..., 31) instead: one
// widening gives every byte its own lane, the byte itself indexes the low
// nibble and byte >> 4 the high one (the permute reads index bits 0-3), so a
// group needs three shuffles. x is de-interleaved the same way once per call,
// and the two accumulators are put back in canonical lane order before the
// lane tree, so every lane sees exactly the canonical fma sequence.
template <WeightType kType>
void rows_single_nibbles(const WeightView& w, const float* x, float* y, size_t row_begin, size_t row_end,
                         float* x_split) {
  RowSource<kType> src(w);
  split_even_odd(x, 0, 1, src.groups, x_split);
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) fused_tile_nibbles<kType, 4, 1>(src, x_split, 0, y, 0, r);
  for (; r < row_end; ++r) fused_tile_nibbles<kType, 1, 1>(src, x_split, 0, y, 0, r);
}

// Rows of one run of TT x rows: pairs, then a last single row.
template <WeightType kType, int TT>
void fused_run_nibbles(const RowSource<kType>& src, const float* x_split, size_t xs, float* y, size_t y_stride,
                       size_t row_begin, size_t row_end) {
  size_t r = row_begin;
  for (; r + 2 <= row_end; r += 2) fused_tile_nibbles<kType, 2, TT>(src, x_split, xs, y, y_stride, r);
  if (r < row_end) fused_tile_nibbles<kType, 1, TT>(src, x_split, xs, y, y_stride, r);
}

// Runs of kRelayoutRows (four) x rows, each split into x_split, then every
// row of the range over it: 2 rows x 4 x rows x 2 keeps 16 accumulators, the
// decoded pair and an x pair in registers.
template <WeightType kType>
void rows_fused_nibbles(const WeightView& w, const float* x, size_t xs, size_t T, float* y, size_t row_begin,
                        size_t row_end, float* x_split) {
  static_assert(kRelayoutRows == 4, "the runs below are four x rows");
  RowSource<kType> src(w);
  for (size_t t = 0; t < T; t += 4) {
    const size_t n = T - t < 4 ? T - t : 4;
    split_even_odd(x + t * xs, xs, n, src.groups, x_split);
    const float* xt = x_split;
    float* yt = y + t * w.rows;
    switch (n) {
      case 4: fused_run_nibbles<kType, 4>(src, xt, xs, yt, w.rows, row_begin, row_end); break;
      case 3: fused_run_nibbles<kType, 3>(src, xt, xs, yt, w.rows, row_begin, row_end); break;
      case 2: fused_run_nibbles<kType, 2>(src, xt, xs, yt, w.rows, row_begin, row_end); break;
      default: fused_run_nibbles<kType, 1>(src, xt, xs, yt, w.rows, row_begin, row_end); break;
    }
  }
}

// Accumulates n columns (a multiple of 32) of 4 decoded rows x 2 x rows into
// their lane accumulators: each weight load feeds two x rows and each x load
// four weight rows. acc[i][t] live at acc + ((i * T) + t) * 32.
void tile_4x2(const float* dec, const float* x0, const float* x1, size_t n, float* acc, size_t T) {
  __m512 a[4][2][2];
#pragma GCC unroll 4
  for (size_t i = 0; i < 4; ++i)
#pragma GCC unroll 2
    for (size_t t = 0; t < 2; ++t) {
      a[i][t][0] = _mm512_loadu_ps(acc + (i * T + t) * 32);
      a[i][t][1] = _mm512_loadu_ps(acc + (i * T + t) * 32 + 16);
    }
  for (size_t c = 0; c < n; c += 32) {
    __m512 x00 = _mm512_loadu_ps(x0 + c), x01 = _mm512_loadu_ps(x0 + c + 16);
    __m512 x10 = _mm512_loadu_ps(x1 + c), x11 = _mm512_loadu_ps(x1 + c + 16);
#pragma GCC unroll 4
    for (size_t i = 0; i < 4; ++i) {
      __m512 w0 = _mm512_load_ps(dec + i * kColBlock + c), w1 = _mm512_load_ps(dec + i * kColBlock + c + 16);
      // Keep w0/w1 in registers: left alone, GCC folds them into both fmas as
      // memory operands, loading each twice (20 loads per 16 fmas, which made
      // the loop load-bound instead of fma-bound).
      __asm__("" : "+v"(w0), "+v"(w1));
      a[i][0][0] = _mm512_fmadd_ps(w0, x00, a[i][0][0]);
      a[i][0][1] = _mm512_fmadd_ps(w1, x01, a[i][0][1]);
      a[i][1][0] = _mm512_fmadd_ps(w0, x10, a[i][1][0]);
      a[i][1][1] = _mm512_fmadd_ps(w1, x11, a[i][1][1]);
    }
  }
#pragma GCC unroll 4
  for (size_t i = 0; i < 4; ++i)
#pragma GCC unroll 2
    for (size_t t = 0; t < 2; ++t) {
      _mm512_storeu_ps(acc + (i * T + t) * 32, a[i][t][0]);
      _mm512_storeu_ps(acc + (i * T + t) * 32 + 16, a[i][t][1]);
    }
}

// One decoded row x one x row: the remainder of the tiling.
void tile_1x1(const float* dec, const float* x, size_t n, float* acc) {
  __m512 lo = _mm512_loadu_ps(acc), hi = _mm512_loadu_ps(acc + 16);
  for (size_t c = 0; c < n; c += 32) {
    lo = _mm512_fmadd_ps(_mm512_loadu_ps(dec + c), _mm512_loadu_ps(x + c), lo);
    hi = _mm512_fmadd_ps(_mm512_loadu_ps(dec + c + 16), _mm512_loadu_ps(x + c + 16), hi);
  }
  _mm512_storeu_ps(acc, lo);
  _mm512_storeu_ps(acc + 16, hi);
}

// T > 1: decode kRowTile rows x kColBlock columns once into scratch, then run
// all T x rows over it. Accumulators persist in scratch across column blocks;
// storing and reloading them is exact, so each output is still the one
// canonical reduction, identical to the T = 1 path.
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
          _mm512_storeu_ps(dec + i * kColBlock + 32 * g, d.lo);
          _mm512_storeu_ps(dec + i * kColBlock + 32 * g + 16, d.hi);
        }
      }
      size_t t = 0;
      if (R == 4) {
        for (; t + 2 <= T; t += 2) tile_4x2(dec, x + t * xs + c0, x + (t + 1) * xs + c0, n, acc + t * 32, T);
      }
      for (; t < T; ++t)
        for (size_t i = 0; i < R; ++i) tile_1x1(dec + i * kColBlock, x + t * xs + c0, n, acc + (i * T + t) * 32);
    }
    for (size_t i = 0; i < R; ++i) {
      float scale = 1.0f;
      if constexpr (kType == WeightType::Int8Row) scale = f16_to_f32(static_cast<const uint16_t*>(w.scales)[rb + i]);
      for (size_t t = 0; t < T; ++t) {
        const float* a = acc + (i * T + t) * 32;
        float dot = lane_tree512(_mm512_loadu_ps(a), _mm512_loadu_ps(a + 16));
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
    if constexpr (nibbles<kType>()) {
      rows_single_nibbles<kType>(w, x, y, row_begin, row_end, scratch + kScratchFixed + kScratchPerT);
    } else {
      rows_single<kType>(w, x, y, row_begin, row_end);
    }
  } else if constexpr (nibbles<kType>()) {
    rows_fused_nibbles<kType>(w, x, xs, T, y, row_begin, row_end, scratch + kScratchFixed + kScratchPerT * T);
  } else if (T <= fused_max_rows<kType>()) {
    rows_small_batch<kType>(w, x, xs, T, y, row_begin, row_end);
  } else {
    rows_batched<kType>(w, x, xs, T, y, row_begin, row_end, scratch);
  }
}

}  // namespace

void matmul_rows_avx512(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y,
                        size_t row_begin, size_t row_end, float* scratch) {
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
