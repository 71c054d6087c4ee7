// Internal: the NEON helpers shared by matmul_neon.cpp and ops_neon.cpp (the
// <arm_neon.h> include and the canonical lane-tree reduction).
//
// Include this header ONLY from the NEON .cpp files (built for AArch64 targets
// alone, see CMakeLists.txt). The helpers are static inline, as in the AVX2
// and AVX-512 headers, so each file keeps its own internal copy.
//
// The 32 canonical lanes (k3-model.md §4.4) are eight float32x4_t a0..a7
// (lanes 0-3, 4-7, ..., 28-31): exactly the eight 4-lane vectors the lane tree
// is written over, so the tree needs no shuffles at all. vfmaq_f32 rounds once
// per lane like std::fma. NEON's vmulq_f32/vaddq_f32 are plain vector * and +
// to GCC, so the unfused multiply-then-add loops stay unfused only because the
// build passes -ffp-contract=off (CMakeLists.txt; GCC's AArch64 default would
// contract them into FMLA).
#pragma once

#include <arm_neon.h>

namespace deltafin::kernels_detail {

// (v0 + v1) + (v2 + v3) of one 4-lane vector: FADDP adds adjacent pairs.
static inline float finish4_neon(float32x4_t v) {
  float32x2_t pairs = vpadd_f32(vget_low_f32(v), vget_high_f32(v));  // (v0+v1, v2+v3)
  return vget_lane_f32(pairs, 0) + vget_lane_f32(pairs, 1);
}

// The canonical lane tree over a[0..7]: b_j = a_2j + a_2j+1, c = (b0+b1, b2+b3),
// v = c0 + c1, then (v0 + v1) + (v2 + v3).
static inline float lane_tree_neon(const float32x4_t a[8]) {
  float32x4_t b0 = vaddq_f32(a[0], a[1]), b1 = vaddq_f32(a[2], a[3]);
  float32x4_t b2 = vaddq_f32(a[4], a[5]), b3 = vaddq_f32(a[6], a[7]);
  return finish4_neon(vaddq_f32(vaddq_f32(b0, b1), vaddq_f32(b2, b3)));
}

// A software prefetch for reading (PRFM PLDL1KEEP).
static inline void prefetch_neon(const void* p) { __builtin_prefetch(p, 0, 3); }

}  // namespace deltafin::kernels_detail
