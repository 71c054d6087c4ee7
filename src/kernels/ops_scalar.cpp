// Scalar reference path: the canonical orders written out literally, one
// element at a time. std::fma is exactly rounded, so each step here equals one
// lane of _mm256_fmadd_ps / _mm512_fmadd_ps and the SIMD paths agree bit for bit.
#include <cmath>

#include "kernels/kernel_table.h"
#include "kernels/ops.h"  // sigmoid
#include "kernels/portable_math.h"

namespace deltafin::kernels_detail {

float lane_tree(const float* acc) {
  float b[4][4];
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 4; ++l) b[j][l] = acc[8 * j + l] + acc[8 * j + 4 + l];  // b_j = a_2j + a_2j+1
  float c[2][4];
  for (int j = 0; j < 2; ++j)
    for (int l = 0; l < 4; ++l) c[j][l] = b[2 * j][l] + b[2 * j + 1][l];
  float v[4];
  for (int l = 0; l < 4; ++l) v[l] = c[0][l] + c[1][l];
  return (v[0] + v[1]) + (v[2] + v[3]);
}

namespace {

float dot_scalar(const float* a, const float* b, size_t n) {
  float acc[32] = {};
  for (size_t i = 0; i < n; ++i) acc[i % 32] = std::fma(a[i], b[i], acc[i % 32]);
  return lane_tree(acc);
}

// fma(a[i], 1.0f, acc) rounds once, exactly like acc + a[i]: plain adds.
float sum_scalar(const float* a, size_t n) {
  float acc[32] = {};
  for (size_t i = 0; i < n; ++i) acc[i % 32] = acc[i % 32] + a[i];
  return lane_tree(acc);
}

void scale_mul_scalar(const float* x, float r, const float* w, size_t n, float* out) {
  if (w) {
    for (size_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * r);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = x[i] * r;
  }
}

void axpy_scalar(float a, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = y[i] + a * x[i];
}

// The recurrence as k3-model.md §7.5 step 7 states it, one full pass per line;
// o holds the prediction, then delta, then the read-out.
void kda_core_scalar(float* S, const float* q, const float* k, const float* v, const float* decay,
                     const float* bk, size_t K, size_t V, float* o) {
  for (size_t r = 0; r < K; ++r)
    for (size_t j = 0; j < V; ++j) S[r * V + j] = S[r * V + j] * decay[r];
  for (size_t j = 0; j < V; ++j) o[j] = 0.0f;
  for (size_t r = 0; r < K; ++r)
    for (size_t j = 0; j < V; ++j) o[j] = o[j] + k[r] * S[r * V + j];
  for (size_t j = 0; j < V; ++j) o[j] = v[j] - o[j];
  for (size_t r = 0; r < K; ++r)
    for (size_t j = 0; j < V; ++j) S[r * V + j] = S[r * V + j] + bk[r] * o[j];
  for (size_t j = 0; j < V; ++j) o[j] = 0.0f;
  for (size_t r = 0; r < K; ++r)
    for (size_t j = 0; j < V; ++j) o[j] = o[j] + q[r] * S[r * V + j];
}

}  // namespace

// The reference: ops.h's formula, one element at a time.
void situ_scalar(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out) {
  for (size_t i = 0; i < n; ++i) {
    float t1 = portable_tanhf(g[i] / beta);
    float t2 = t1 * beta;
    float t3 = t2 * sigmoid(g[i]);
    float t4 = portable_tanhf(u[i] / beta_lin);
    float t5 = t4 * beta_lin;
    out[i] = t3 * t5;
  }
}

extern const KernelTable kScalarKernels = {
    &matmul_rows_scalar, &dot_scalar, &sum_scalar, &scale_mul_scalar, &axpy_scalar, &kda_core_scalar, &situ_scalar,
};

}  // namespace deltafin::kernels_detail
