// Internal: the AVX-512 helpers shared by matmul_avx512.cpp and ops_avx512.cpp
// (the <immintrin.h> include and the canonical lane-tree reduction).
//
// Include this header ONLY from the per-ISA .cpp files compiled with
// -mavx512f -mavx512bw -mavx512vl (set_source_files_properties in
// CMakeLists.txt). The helpers are static inline so that, as kernel_table.h
// requires, every such file gets its own internal copy and no baseline file
// can end up calling AVX-512 code.
#pragma once

// GCC 12.2's AVX-512 intrinsics start from _mm512_undefined_*(), which trips
// -Wmaybe-uninitialized at every use (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace deltafin::kernels_detail {

// (v0 + v1) + (v2 + v3) of one 4-lane vector.
static inline float finish4(__m128 v) {
  __m128 pairs = _mm_add_ps(v, _mm_movehdup_ps(v));  // lane 0: v0+v1, lane 2: v2+v3
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehl_ps(pairs, pairs)));
}

// (a0 + a1) + (a2 + a3) for the four 4-lane quarters of 16 accumulators.
static inline __m128 quarter_tree(__m512 z) {
  __m128 b0 = _mm_add_ps(_mm512_castps512_ps128(z), _mm512_extractf32x4_ps(z, 1));
  __m128 b1 = _mm_add_ps(_mm512_extractf32x4_ps(z, 2), _mm512_extractf32x4_ps(z, 3));
  return _mm_add_ps(b0, b1);
}

// The canonical lane tree: c0 from lanes 0-15, c1 from lanes 16-31, v = c0 + c1.
static inline float lane_tree512(__m512 lo, __m512 hi) {
  return finish4(_mm_add_ps(quarter_tree(lo), quarter_tree(hi)));
}

}  // namespace deltafin::kernels_detail
