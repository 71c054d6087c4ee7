// NEON vector ops (AArch64 builds only). The reductions keep the 32 canonical
// lanes in eight float32x4_t and close them with the same lane tree as the
// scalar path. A partial last group is copied into a padded buffer whose
// extra columns give products of -0.0 (a = +0, b = -0.0f), and
// acc + (-0.0) == acc bit for bit, so unused lanes stay unchanged. The
// elementwise loops do per lane exactly the scalar operations, unfused
// (simd_neon.h says why that holds). Same shapes as ops_avx2.cpp.
// See kernel_table.h for what this file may and may not use.
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_neon.h"  // arm_neon.h, lane_tree_neon

namespace deltafin::kernels_detail {

namespace {

// Copies the rem (< 32) remaining values into 32 slots, the rest set to fill.
inline void pad32(const float* src, size_t rem, float fill, float* dst) {
  for (size_t i = 0; i < 32; ++i) dst[i] = i < rem ? src[i] : fill;
}

// The two cache lines kPrefetchBytes past the 32 floats at p (long streams
// such as the bandwidth benchmark's 1 GiB sum; harmless past the end).
inline void prefetch2(const float* p) {
  const char* c = reinterpret_cast<const char*>(p) + kPrefetchBytes;
  prefetch_neon(c);
  prefetch_neon(c + 64);
}

float dot_neon(const float* a, const float* b, size_t n) {
  float32x4_t acc[8];
  for (int k = 0; k < 8; ++k) acc[k] = vdupq_n_f32(0.0f);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch2(a + i), prefetch2(b + i);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) acc[k] = vfmaq_f32(acc[k], vld1q_f32(a + i + 4 * k), vld1q_f32(b + i + 4 * k));
  }
  if (i < n) {
    alignas(16) float pa[32], pb[32];
    pad32(a + i, n - i, 0.0f, pa);
    pad32(b + i, n - i, -0.0f, pb);
    for (int k = 0; k < 8; ++k) acc[k] = vfmaq_f32(acc[k], vld1q_f32(pa + 4 * k), vld1q_f32(pb + 4 * k));
  }
  return lane_tree_neon(acc);
}

float sum_neon(const float* a, size_t n) {
  float32x4_t acc[8];
  for (int k = 0; k < 8; ++k) acc[k] = vdupq_n_f32(0.0f);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch2(a + i);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) acc[k] = vaddq_f32(acc[k], vld1q_f32(a + i + 4 * k));
  }
  if (i < n) {
    alignas(16) float pa[32];
    pad32(a + i, n - i, -0.0f, pa);
    for (int k = 0; k < 8; ++k) acc[k] = vaddq_f32(acc[k], vld1q_f32(pa + 4 * k));
  }
  return lane_tree_neon(acc);
}

void scale_mul_neon(const float* x, float r, const float* w, size_t n, float* out) {
  float32x4_t vr = vdupq_n_f32(r);
  size_t i = 0;
  if (w) {
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vld1q_f32(w + i), vmulq_f32(vld1q_f32(x + i), vr)));
    for (; i < n; ++i) out[i] = w[i] * (x[i] * r);
  } else {
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vld1q_f32(x + i), vr));
    for (; i < n; ++i) out[i] = x[i] * r;
  }
}

void axpy_neon(float a, const float* x, float* y, size_t n) {
  float32x4_t va = vdupq_n_f32(a);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_f32(va, vld1q_f32(x + i))));
  for (; i < n; ++i) y[i] = y[i] + a * x[i];
}

// Columns [j0, j0 + 4 W) of the recurrence; per element the operations and
// their order are those of kda_core_scalar.
template <int W>
void kda_columns(float* S, const float* q, const float* k, const float* v, const float* decay, const float* bk,
                 size_t K, size_t V, size_t j0, float* o) {
  float32x4_t acc[W], delta[W];
  for (int u = 0; u < W; ++u) acc[u] = vdupq_n_f32(0.0f);
  for (size_t r = 0; r < K; ++r) {
    float* row = S + r * V + j0;
    float32x4_t d = vdupq_n_f32(decay[r]), kr = vdupq_n_f32(k[r]);
    for (int u = 0; u < W; ++u) {
      float32x4_t s = vmulq_f32(vld1q_f32(row + 4 * u), d);
      vst1q_f32(row + 4 * u, s);
      acc[u] = vaddq_f32(acc[u], vmulq_f32(kr, s));
    }
  }
  for (int u = 0; u < W; ++u) {
    delta[u] = vsubq_f32(vld1q_f32(v + j0 + 4 * u), acc[u]);
    acc[u] = vdupq_n_f32(0.0f);
  }
  for (size_t r = 0; r < K; ++r) {
    float* row = S + r * V + j0;
    float32x4_t b = vdupq_n_f32(bk[r]), qr = vdupq_n_f32(q[r]);
    for (int u = 0; u < W; ++u) {
      float32x4_t s = vaddq_f32(vld1q_f32(row + 4 * u), vmulq_f32(b, delta[u]));
      vst1q_f32(row + 4 * u, s);
      acc[u] = vaddq_f32(acc[u], vmulq_f32(qr, s));
    }
  }
  for (int u = 0; u < W; ++u) vst1q_f32(o + j0 + 4 * u, acc[u]);
}

void kda_core_neon(float* S, const float* q, const float* k, const float* v, const float* decay, const float* bk,
                   size_t K, size_t V, float* o) {
  size_t j = 0;
  for (; j + 32 <= V; j += 32) kda_columns<8>(S, q, k, v, decay, bk, K, V, j, o);
  for (; j + 4 <= V; j += 4) kda_columns<1>(S, q, k, v, decay, bk, K, V, j, o);
  for (; j < V; ++j) {  // the last V % 4 columns, one at a time
    float acc = 0.0f;
    for (size_t r = 0; r < K; ++r) {
      float s = S[r * V + j] * decay[r];
      S[r * V + j] = s;
      acc = acc + k[r] * s;
    }
    float delta = v[j] - acc;
    acc = 0.0f;
    for (size_t r = 0; r < K; ++r) {
      float s = S[r * V + j] + bk[r] * delta;
      S[r * V + j] = s;
      acc = acc + q[r] * s;
    }
    o[j] = acc;
  }
}

}  // namespace

extern const KernelTable kNeonKernels = {
    &matmul_rows_neon, &dot_neon, &sum_neon, &scale_mul_neon, &axpy_neon, &kda_core_neon, &situ_scalar,
};

}  // namespace deltafin::kernels_detail
