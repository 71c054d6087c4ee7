// AVX-512 vector ops (compiled with -mavx512f -mavx512bw -mavx512vl). The
// reductions keep the 32 canonical lanes in two zmm registers and close them
// with the same lane tree as the scalar path; tails use masked fma/add that
// leave the unused lanes bit-unchanged. The elementwise loops (scale_mul, axpy,
// kda_core) do per lane exactly the scalar operations, unfused.
// See kernel_table.h for what this file may and may not use.
#include "kernels/kernel_table.h"
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

}  // namespace

extern const KernelTable kAvx512Kernels = {
    &matmul_rows_avx512, &dot_avx512, &sum_avx512, &scale_mul_avx512, &axpy_avx512, &kda_core_avx512,
};

}  // namespace deltafin::kernels_detail
