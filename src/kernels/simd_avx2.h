// Internal: the AVX2 helpers shared by matmul_avx2.cpp and ops_avx2.cpp (the
// <immintrin.h> include and the canonical lane-tree reduction).
//
// Include this header ONLY from the per-ISA .cpp files compiled with
// -mavx2 -mfma -mf16c (set_source_files_properties in CMakeLists.txt). The
// helpers are static inline so that, as kernel_table.h requires, every such
// file gets its own internal copy and no baseline file can end up calling
// AVX2 code.
#pragma once

#include <immintrin.h>

namespace deltafin::kernels_detail {

// (v0 + v1) + (v2 + v3) of one 4-lane vector.
static inline float finish4(__m128 v) {
  __m128 pairs = _mm_add_ps(v, _mm_movehdup_ps(v));  // lane 0: v0+v1, lane 2: v2+v3
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehl_ps(pairs, pairs)));
}

// b_i = a_2i + a_2i+1 is the low half plus the high half of ymm i.
static inline __m128 halves(__m256 v) { return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); }

// The canonical lane tree over the four ymm accumulators (lanes 0-7, 8-15,
// 16-23, 24-31).
static inline float lane_tree256(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  __m128 c0 = _mm_add_ps(halves(a0), halves(a1));
  __m128 c1 = _mm_add_ps(halves(a2), halves(a3));
  return finish4(_mm_add_ps(c0, c1));
}

}  // namespace deltafin::kernels_detail
