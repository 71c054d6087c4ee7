// AVX2 vector ops (compiled with -mavx2 -mfma -mf16c). The reductions keep the
// 32 canonical lanes in four ymm registers and close them with the same lane
// tree as the scalar path. A partial last group is copied into a padded buffer
// whose extra columns give products of -0.0 (a = +0, b = -0.0f), and
// acc + (-0.0) == acc bit for bit, so unused lanes stay unchanged. The
// elementwise loops do per lane exactly the scalar operations, unfused.
// See kernel_table.h for what this file may and may not use.
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/simd_avx2.h"  // immintrin.h, lane_tree256

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
  _mm_prefetch(c, _MM_HINT_T0);
  _mm_prefetch(c + 64, _MM_HINT_T0);
}

float dot_avx2(const float* a, const float* b, size_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch2(a + i), prefetch2(b + i);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
  }
  if (i < n) {
    alignas(32) float pa[32], pb[32];
    pad32(a + i, n - i, 0.0f, pa);
    pad32(b + i, n - i, -0.0f, pb);
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(_mm256_load_ps(pa + 8 * k), _mm256_load_ps(pb + 8 * k), acc[k]);
  }
  return lane_tree256(acc[0], acc[1], acc[2], acc[3]);
}

float sum_avx2(const float* a, size_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch2(a + i);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(a + i + 8 * k));
  }
  if (i < n) {
    alignas(32) float pa[32];
    pad32(a + i, n - i, -0.0f, pa);
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_load_ps(pa + 8 * k));
  }
  return lane_tree256(acc[0], acc[1], acc[2], acc[3]);
}

void scale_mul_avx2(const float* x, float r, const float* w, size_t n, float* out) {
  __m256 vr = _mm256_set1_ps(r);
  size_t i = 0;
  if (w) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), vr)));
    for (; i < n; ++i) out[i] = w[i] * (x[i] * r);
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vr));
    for (; i < n; ++i) out[i] = x[i] * r;
  }
}

void axpy_avx2(float a, const float* x, float* y, size_t n) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) y[i] = y[i] + a * x[i];
}

// Columns [j0, j0 + 8 W) of the recurrence; per element the operations and
// their order are those of kda_core_scalar.
template <int W>
void kda_columns(float* S, const float* q, const float* k, const float* v, const float* decay, const float* bk,
                 size_t K, size_t V, size_t j0, float* o) {
  __m256 acc[W], delta[W];
  for (int u = 0; u < W; ++u) acc[u] = _mm256_setzero_ps();
  for (size_t r = 0; r < K; ++r) {
    float* row = S + r * V + j0;
    __m256 d = _mm256_set1_ps(decay[r]), kr = _mm256_set1_ps(k[r]);
    for (int u = 0; u < W; ++u) {
      __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + 8 * u), d);
      _mm256_storeu_ps(row + 8 * u, s);
      acc[u] = _mm256_add_ps(acc[u], _mm256_mul_ps(kr, s));
    }
  }
  for (int u = 0; u < W; ++u) {
    delta[u] = _mm256_sub_ps(_mm256_loadu_ps(v + j0 + 8 * u), acc[u]);
    acc[u] = _mm256_setzero_ps();
  }
  for (size_t r = 0; r < K; ++r) {
    float* row = S + r * V + j0;
    __m256 b = _mm256_set1_ps(bk[r]), qr = _mm256_set1_ps(q[r]);
    for (int u = 0; u < W; ++u) {
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(row + 8 * u), _mm256_mul_ps(b, delta[u]));
      _mm256_storeu_ps(row + 8 * u, s);
      acc[u] = _mm256_add_ps(acc[u], _mm256_mul_ps(qr, s));
    }
  }
  for (int u = 0; u < W; ++u) _mm256_storeu_ps(o + j0 + 8 * u, acc[u]);
}

void kda_core_avx2(float* S, const float* q, const float* k, const float* v, const float* decay, const float* bk,
                   size_t K, size_t V, float* o) {
  size_t j = 0;
  for (; j + 32 <= V; j += 32) kda_columns<4>(S, q, k, v, decay, bk, K, V, j, o);
  for (; j + 8 <= V; j += 8) kda_columns<1>(S, q, k, v, decay, bk, K, V, j, o);
  for (; j < V; ++j) {  // the last V % 8 columns, one at a time
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

extern const KernelTable kAvx2Kernels = {
    &matmul_rows_avx2, &dot_avx2, &sum_avx2, &scale_mul_avx2, &axpy_avx2, &kda_core_avx2,
};

}  // namespace deltafin::kernels_detail
