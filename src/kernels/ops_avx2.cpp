// AVX2 vector ops (compiled with -mavx2 -mfma -mf16c). The reductions keep the
// 32 canonical lanes in four ymm registers and close them with the same lane
// tree as the scalar path. A partial last group is copied into a padded buffer
// whose extra columns give products of -0.0 (a = +0, b = -0.0f), and
// acc + (-0.0) == acc bit for bit, so unused lanes stay unchanged. The
// elementwise loops do per lane exactly the scalar operations, unfused.
// See kernel_table.h for what this file may and may not use.
#include <string.h>

#include "kernels/kernel_table.h"
#include "kernels/portable_math.h"  // kPortableExp2Table
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


// SiTU, four elements per step: as situ_avx512 (ops_avx512.cpp), every IEEE
// operation of portable_math.cpp's expf and tanhf and of ops.h's formula per
// lane in the same order, so the bits are situ_scalar's; the tail (n % 4)
// runs situ_scalar itself.
namespace situ4 {

inline __m256d dset(double v) { return _mm256_set1_pd(v); }

// exp_reduced(y), portable_math.cpp, for -150 < y < 150.
inline __m256d exp_reduced(__m256d y) {
  const __m256d round = dset(0x1.8p52);
  const __m256d biased = _mm256_add_pd(_mm256_mul_pd(y, dset(0x1.71547652b82fep+5)), round);
  const __m256d kd = _mm256_sub_pd(biased, round);
  const __m256d r = _mm256_sub_pd(_mm256_sub_pd(y, _mm256_mul_pd(kd, dset(6.93147180369123816490e-01 / 32))),
                                  _mm256_mul_pd(kd, dset(1.90821492927058770002e-10 / 32)));
  __m256d p = _mm256_mul_pd(r, dset(1.0 / 120));
  p = _mm256_mul_pd(r, _mm256_add_pd(dset(1.0 / 24), p));
  p = _mm256_mul_pd(r, _mm256_add_pd(dset(1.0 / 6), p));
  p = _mm256_mul_pd(r, _mm256_add_pd(dset(1.0 / 2), p));
  p = _mm256_mul_pd(r, _mm256_add_pd(dset(1.0), p));
  p = _mm256_add_pd(dset(1.0), p);
  // k = kd as an integer (biased and round share a binade of spacing 1).
  const __m256i k = _mm256_sub_epi64(_mm256_castpd_si256(biased), _mm256_castpd_si256(round));
  const __m256i j = _mm256_and_si256(k, _mm256_set1_epi64x(31));
  const __m256d table = _mm256_i64gather_pd(kPortableExp2Table, j, 8);
  // 2^((k - j) / 32): k - j is a multiple of 32, so shifting it left by 47
  // puts (k - j) / 32 in the exponent field, two's complement included.
  const __m256i bits = _mm256_add_epi64(_mm256_slli_epi64(_mm256_sub_epi64(k, j), 47), _mm256_set1_epi64x(1023ll << 52));
  return _mm256_mul_pd(_mm256_mul_pd(table, p), _mm256_castsi256_pd(bits));
}

// The selects narrow a double compare mask with _mm256_cvtpd_ps: all-ones is a
// NaN with the sign set, which stays a negative NaN as a float, and blendv
// reads only the sign bit.

// portable_expf on 4 floats.
inline __m128 expf4(__m128 x) {
  const __m256d y = _mm256_cvtps_pd(x);
  const __m256d nan = _mm256_cmp_pd(y, y, _CMP_UNORD_Q);
  const __m256d over = _mm256_cmp_pd(y, dset(89.0), _CMP_GT_OQ);
  const __m256d under = _mm256_cmp_pd(y, dset(-104.0), _CMP_LT_OQ);
  const __m256d other = _mm256_or_pd(nan, _mm256_or_pd(over, under));
  const __m256d e = exp_reduced(_mm256_blendv_pd(y, dset(0.0), other));
  __m128 r = _mm256_cvtpd_ps(e);
  r = _mm_blendv_ps(r, _mm_set1_ps(__builtin_huge_valf()), _mm256_cvtpd_ps(over));
  r = _mm_blendv_ps(r, _mm_setzero_ps(), _mm256_cvtpd_ps(under));
  return _mm_blendv_ps(r, x, _mm256_cvtpd_ps(nan));
}

// portable_tanhf on 4 floats.
inline __m128 tanhf4(__m128 x) {
  const __m256d a = _mm256_andnot_pd(dset(-0.0), _mm256_cvtps_pd(x));
  const __m256d nan = _mm256_cmp_pd(a, a, _CMP_UNORD_Q);
  const __m256d small = _mm256_cmp_pd(a, dset(0x1p-12), _CMP_LT_OQ);
  const __m256d big = _mm256_cmp_pd(a, dset(9.5), _CMP_GT_OQ);
  const __m256d other = _mm256_or_pd(nan, _mm256_or_pd(small, big));
  const __m256d e = exp_reduced(_mm256_mul_pd(dset(2.0), _mm256_blendv_pd(a, dset(1.0), other)));
  __m256d t = _mm256_div_pd(_mm256_sub_pd(e, dset(1.0)), _mm256_add_pd(e, dset(1.0)));
  const __m256d series = _mm256_sub_pd(a, _mm256_div_pd(_mm256_mul_pd(_mm256_mul_pd(a, a), a), dset(3.0)));
  t = _mm256_blendv_pd(t, series, small);
  t = _mm256_blendv_pd(t, dset(1.0), big);
  __m128 r = _mm256_cvtpd_ps(t);
  r = _mm_xor_ps(r, _mm_and_ps(x, _mm_set1_ps(-0.0f)));  // the sign of x
  return _mm_blendv_ps(r, x, _mm256_cvtpd_ps(nan));
}

}  // namespace situ4

void situ_avx2(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out) {
  const __m128 b = _mm_set1_ps(beta), bl = _mm_set1_ps(beta_lin), one = _mm_set1_ps(1.0f);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 gi = _mm_loadu_ps(g + i), ui = _mm_loadu_ps(u + i);
    const __m128 t2 = _mm_mul_ps(situ4::tanhf4(_mm_div_ps(gi, b)), b);
    const __m128 sig = _mm_div_ps(one, _mm_add_ps(one, situ4::expf4(_mm_xor_ps(gi, _mm_set1_ps(-0.0f)))));
    const __m128 t5 = _mm_mul_ps(situ4::tanhf4(_mm_div_ps(ui, bl)), bl);
    _mm_storeu_ps(out + i, _mm_mul_ps(_mm_mul_ps(t2, sig), t5));
  }
  if (i < n) situ_scalar(g + i, u + i, n - i, beta, beta_lin, out + i);
}

}  // namespace

extern const KernelTable kAvx2Kernels = {
    &matmul_rows_avx2, &dot_avx2, &sum_avx2, &scale_mul_avx2, &axpy_avx2, &kda_core_avx2, &situ_avx2,
};

}  // namespace deltafin::kernels_detail
