// AVX-512 vector ops (compiled with -mavx512f -mavx512bw -mavx512vl). The
// reductions keep the 32 canonical lanes in two zmm registers and close them
// with the same lane tree as the scalar path; tails use masked fma/add that
// leave the unused lanes bit-unchanged. The elementwise loops (scale_mul, axpy,
// kda_core) do per lane exactly the scalar operations, unfused.
// See kernel_table.h for what this file may and may not use.
#include "kernels/kernel_table.h"
#include "kernels/portable_math.h"  // kPortableExp2Table
#include "kernels/simd_avx512.h"  // immintrin.h, lane_tree512

namespace deltafin::kernels_detail {

namespace {

// Lane masks for the rem (1..31) columns of a partial last group.
inline __mmask16 mask_lo(size_t rem) { return rem >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rem) - 1); }
inline __mmask16 mask_hi(size_t rem) { return rem > 16 ? __mmask16((1u << (rem - 16)) - 1) : __mmask16(0); }

// The two cache lines kPrefetchBytes past the 32 floats at p (long streams
// such as the bandwidth benchmark's 1 GiB sum; harmless past the end).
inline void prefetch2(const float* p) {
  const char* c = reinterpret_cast<const char*>(p) + kPrefetchBytes;
  _mm_prefetch(c, _MM_HINT_T0);
  _mm_prefetch(c + 64, _MM_HINT_T0);
}

float dot_avx512(const float* a, const float* b, size_t n) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch2(a + i), prefetch2(b + i);
    lo = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), lo);
    hi = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), hi);
  }
  if (i < n) {
    __mmask16 ml = mask_lo(n - i), mh = mask_hi(n - i);
    lo = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(ml, a + i), _mm512_maskz_loadu_ps(ml, b + i), lo, ml);
    if (mh) hi = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(mh, a + i + 16), _mm512_maskz_loadu_ps(mh, b + i + 16), hi, mh);
  }
  return lane_tree512(lo, hi);
}

float sum_avx512(const float* a, size_t n) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  size_t i = 0;
  // Exactly two registers: they are the 32 canonical lanes (more independent
  // chains would be a different order).
  for (; i + 32 <= n; i += 32) {
    prefetch2(a + i);
    lo = _mm512_add_ps(lo, _mm512_loadu_ps(a + i));
    hi = _mm512_add_ps(hi, _mm512_loadu_ps(a + i + 16));
  }
  if (i < n) {
    __mmask16 ml = mask_lo(n - i), mh = mask_hi(n - i);
    lo = _mm512_mask_add_ps(lo, ml, lo, _mm512_maskz_loadu_ps(ml, a + i));
    if (mh) hi = _mm512_mask_add_ps(hi, mh, hi, _mm512_maskz_loadu_ps(mh, a + i + 16));
  }
  return lane_tree512(lo, hi);
}

void scale_mul_avx512(const float* x, float r, const float* w, size_t n, float* out) {
  __m512 vr = _mm512_set1_ps(r);
  size_t i = 0;
  if (w) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(w + i), _mm512_mul_ps(_mm512_loadu_ps(x + i), vr)));
    for (; i < n; ++i) out[i] = w[i] * (x[i] * r);
  } else {
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vr));
    for (; i < n; ++i) out[i] = x[i] * r;
  }
}

void axpy_avx512(float a, const float* x, float* y, size_t n) {
  __m512 va = _mm512_set1_ps(a);
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_mul_ps(va, _mm512_loadu_ps(x + i))));
  for (; i < n; ++i) y[i] = y[i] + a * x[i];
}

// Columns [j0, j0 + 16 W) of the recurrence, k ascending, with the prediction
// and read-out sums held in registers; per element the operations and their
// order are those of kda_core_scalar.
template <int W>
void kda_columns(float* S, const float* q, const float* k, const float* v, const float* decay, const float* bk,
                 size_t K, size_t V, size_t j0, float* o) {
  __m512 acc[W], delta[W];
  for (int u = 0; u < W; ++u) acc[u] = _mm512_setzero_ps();
  for (size_t r = 0; r < K; ++r) {
    float* row = S + r * V + j0;
    __m512 d = _mm512_set1_ps(decay[r]), kr = _mm512_set1_ps(k[r]);
    for (int u = 0; u < W; ++u) {
      __m512 s = _mm512_mul_ps(_mm512_loadu_ps(row + 16 * u), d);
      _mm512_storeu_ps(row + 16 * u, s);
      acc[u] = _mm512_add_ps(acc[u], _mm512_mul_ps(kr, s));
    }
  }
  for (int u = 0; u < W; ++u) {
    delta[u] = _mm512_sub_ps(_mm512_loadu_ps(v + j0 + 16 * u), acc[u]);
    acc[u] = _mm512_setzero_ps();
  }
  for (size_t r = 0; r < K; ++r) {
    float* row = S + r * V + j0;
    __m512 b = _mm512_set1_ps(bk[r]), qr = _mm512_set1_ps(q[r]);
    for (int u = 0; u < W; ++u) {
      __m512 s = _mm512_add_ps(_mm512_loadu_ps(row + 16 * u), _mm512_mul_ps(b, delta[u]));
      _mm512_storeu_ps(row + 16 * u, s);
      acc[u] = _mm512_add_ps(acc[u], _mm512_mul_ps(qr, s));
    }
  }
  for (int u = 0; u < W; ++u) _mm512_storeu_ps(o + j0 + 16 * u, acc[u]);
}

void kda_core_avx512(float* S, const float* q, const float* k, const float* v, const float* decay, const float* bk,
                     size_t K, size_t V, float* o) {
  size_t j = 0;
  for (; j + 64 <= V; j += 64) kda_columns<4>(S, q, k, v, decay, bk, K, V, j, o);
  for (; j + 16 <= V; j += 16) kda_columns<1>(S, q, k, v, decay, bk, K, V, j, o);
  for (; j < V; ++j) {  // the last V % 16 columns, one at a time
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


// SiTU, eight elements per step: portable_math.cpp's expf and tanhf and ops.h's
// formula, every IEEE operation of the scalar code done per lane in the same
// order (double lanes for the double parts, then one rounding to float), so
// the bits are situ_scalar's. The branches become per-lane selects; lanes a
// branch does not take compute a harmless value from a safe input.
namespace situ8 {

inline __m512d dset(double v) { return _mm512_set1_pd(v); }

// exp_reduced(y), portable_math.cpp, for -150 < y < 150.
inline __m512d exp_reduced(__m512d y) {
  const __m512d round = dset(0x1.8p52);
  const __m512d biased = _mm512_add_pd(_mm512_mul_pd(y, dset(0x1.71547652b82fep+5)), round);
  const __m512d kd = _mm512_sub_pd(biased, round);
  const __m512d r = _mm512_sub_pd(_mm512_sub_pd(y, _mm512_mul_pd(kd, dset(6.93147180369123816490e-01 / 32))),
                                  _mm512_mul_pd(kd, dset(1.90821492927058770002e-10 / 32)));
  __m512d p = _mm512_mul_pd(r, dset(1.0 / 120));
  p = _mm512_mul_pd(r, _mm512_add_pd(dset(1.0 / 24), p));
  p = _mm512_mul_pd(r, _mm512_add_pd(dset(1.0 / 6), p));
  p = _mm512_mul_pd(r, _mm512_add_pd(dset(1.0 / 2), p));
  p = _mm512_mul_pd(r, _mm512_add_pd(dset(1.0), p));
  p = _mm512_add_pd(dset(1.0), p);
  // k = kd as an integer: biased and round share a binade of spacing 1.
  const __m512i k = _mm512_sub_epi64(_mm512_castpd_si512(biased), _mm512_castpd_si512(round));
  const __m512i j = _mm512_and_si512(k, _mm512_set1_epi64(31));
  const double* t = kPortableExp2Table;
  const __m512d lo = _mm512_permutex2var_pd(_mm512_loadu_pd(t), j, _mm512_loadu_pd(t + 8));
  const __m512d hi = _mm512_permutex2var_pd(_mm512_loadu_pd(t + 16), j, _mm512_loadu_pd(t + 24));
  const __m512d table = _mm512_mask_blend_pd(_mm512_test_epi64_mask(j, _mm512_set1_epi64(16)), lo, hi);
  const __m512i m = _mm512_srai_epi64(_mm512_sub_epi64(k, j), 5);  // (k - j) / 32, exact
  const __m512d pow2 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(m, _mm512_set1_epi64(1023)), 52));
  return _mm512_mul_pd(_mm512_mul_pd(table, p), pow2);
}

// portable_expf on 8 floats.
inline __m256 expf8(__m256 x) {
  const __m512d y = _mm512_cvtps_pd(x);
  const __mmask8 nan = _mm512_cmp_pd_mask(y, y, _CMP_UNORD_Q);
  const __mmask8 over = _mm512_cmp_pd_mask(y, dset(89.0), _CMP_GT_OQ);
  const __mmask8 under = _mm512_cmp_pd_mask(y, dset(-104.0), _CMP_LT_OQ);
  const __mmask8 mid = static_cast<__mmask8>(~(nan | over | under));
  const __m512d e = exp_reduced(_mm512_mask_blend_pd(mid, dset(0.0), y));
  __m256 r = _mm512_cvtpd_ps(e);
  r = _mm256_mask_blend_ps(over, r, _mm256_set1_ps(__builtin_huge_valf()));
  r = _mm256_mask_blend_ps(under, r, _mm256_setzero_ps());
  return _mm256_mask_blend_ps(nan, r, x);
}

// portable_tanhf on 8 floats.
inline __m256 tanhf8(__m256 x) {
  const __m512d a = _mm512_abs_pd(_mm512_cvtps_pd(x));
  const __mmask8 nan = _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q);
  const __mmask8 small = _mm512_cmp_pd_mask(a, dset(0x1p-12), _CMP_LT_OQ);
  const __mmask8 big = _mm512_cmp_pd_mask(a, dset(9.5), _CMP_GT_OQ);
  const __mmask8 mid = static_cast<__mmask8>(~(nan | small | big));
  const __m512d e = exp_reduced(_mm512_mul_pd(dset(2.0), _mm512_mask_blend_pd(mid, dset(1.0), a)));
  __m512d t = _mm512_div_pd(_mm512_sub_pd(e, dset(1.0)), _mm512_add_pd(e, dset(1.0)));
  const __m512d series = _mm512_sub_pd(a, _mm512_div_pd(_mm512_mul_pd(_mm512_mul_pd(a, a), a), dset(3.0)));
  t = _mm512_mask_blend_pd(small, t, series);
  t = _mm512_mask_blend_pd(big, t, dset(1.0));
  __m256 r = _mm512_cvtpd_ps(t);
  r = _mm256_xor_ps(r, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));  // the sign of x
  return _mm256_mask_blend_ps(nan, r, x);
}

}  // namespace situ8

void situ_avx512(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out) {
  const __m256 b = _mm256_set1_ps(beta), bl = _mm256_set1_ps(beta_lin), one = _mm256_set1_ps(1.0f);
  for (size_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? __mmask8(0xFF) : __mmask8((1u << (n - i)) - 1);
    const __m256 gi = _mm256_maskz_loadu_ps(m, g + i), ui = _mm256_maskz_loadu_ps(m, u + i);
    const __m256 t2 = _mm256_mul_ps(situ8::tanhf8(_mm256_div_ps(gi, b)), b);
    const __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, situ8::expf8(_mm256_xor_ps(gi, _mm256_set1_ps(-0.0f)))));
    const __m256 t3 = _mm256_mul_ps(t2, sig);
    const __m256 t5 = _mm256_mul_ps(situ8::tanhf8(_mm256_div_ps(ui, bl)), bl);
    _mm256_mask_storeu_ps(out + i, m, _mm256_mul_ps(t3, t5));
  }
}

}  // namespace

extern const KernelTable kAvx512Kernels = {
    &matmul_rows_avx512, &dot_avx512, &sum_avx512, &scale_mul_avx512, &axpy_avx512, &kda_core_avx512, &situ_avx512,
};

}  // namespace deltafin::kernels_detail
