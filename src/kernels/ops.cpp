// The public ops: elementwise parts (one scalar implementation for every path)
// around the reductions and inner loops of the active kernel table.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/portable_math.h"

namespace deltafin {

using kernels_detail::kernel_table;

float dot(const float* a, const float* b, size_t n) { return kernel_table().dot(a, b, n); }

float sum(const float* a, size_t n) { return kernel_table().sum(a, n); }

void axpy(float a, const float* x, float* y, size_t n) { kernel_table().axpy(a, x, y, n); }

void rmsnorm(const float* x, const float* w, size_t n, float eps, float* out) {
  if (n == 0) return;
  const auto& kt = kernel_table();
  float var = kt.dot(x, x, n) / static_cast<float>(n);
  float r = 1.0f / std::sqrt(var + eps);
  kt.scale_mul(x, r, w, n, out);
}

void softmax(float* x, size_t n) {
  if (n == 0) return;
  float m = x[0];
  for (size_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (size_t i = 0; i < n; ++i) x[i] = portable_expf(x[i] - m);
  float s = kernel_table().sum(x, n);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] / s;
}

float sigmoid(float x) { return 1.0f / (1.0f + portable_expf(-x)); }

float silu(float x) { return x * sigmoid(x); }

void situ(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out) {
  kernel_table().situ(g, u, n, beta, beta_lin, out);
}

void situ(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out, ThreadPool* pool) {
  // Below a few thousand elements a hand-off costs more than it saves.
  constexpr size_t kPerTask = 1024;
  if (pool == nullptr || pool->size() < 2 || n < 2 * kPerTask) return situ(g, u, n, beta, beta_lin, out);
  pool->parallel_for((n + kPerTask - 1) / kPerTask, [&](size_t begin, size_t end) {
    const size_t i0 = begin * kPerTask, i1 = std::min(n, end * kPerTask);
    situ(g + i0, u + i0, i1 - i0, beta, beta_lin, out + i0);
  });
}

void l2_normalize(float* x, size_t n, float floor) {
  float norm = std::sqrt(dot(x, x, n));
  float d = norm > floor ? norm : floor;
  for (size_t i = 0; i < n; ++i) x[i] = x[i] / d;
}

void short_conv_step(const float* x, const float* w, float* state, size_t channels, size_t kernel, float* out) {
  if (kernel == 0) return;
  for (size_t c = 0; c < channels; ++c) {
    float* s = state + c * kernel;
    const float* wc = w + c * kernel;
    float xc = x[c];
    // Shift the window left and append the current input; the state then holds
    // exactly the window s_0 .. s_{kernel-1}.
    for (size_t j = 0; j + 1 < kernel; ++j) s[j] = s[j + 1];
    s[kernel - 1] = xc;
    float acc = wc[0] * s[0];
    for (size_t j = 1; j < kernel; ++j) acc = acc + wc[j] * s[j];
    out[c] = silu(acc);
  }
}

void kda_step(float* S, const float* q, const float* k, const float* v, const float* g, float beta, size_t K,
              size_t V, float* o) {
  thread_local std::vector<float> factors;
  if (factors.size() < 2 * K) factors.resize(2 * K);
  float* decay = factors.data();
  float* bk = factors.data() + K;
  for (size_t r = 0; r < K; ++r) {
    decay[r] = portable_expf(g[r]);
    bk[r] = beta * k[r];  // rounded before it meets delta
  }
  kernel_table().kda_core(S, q, k, v, decay, bk, K, V, o);
}

void attention(const float* q, const float* keys, size_t key_stride, const float* values, size_t value_stride,
               size_t n, size_t dk, size_t dv, float scale, float* scratch, float* out) {
  const auto& kt = kernel_table();
  for (size_t i = 0; i < dv; ++i) out[i] = 0.0f;
  if (n == 0) return;
  for (size_t j = 0; j < n; ++j) scratch[j] = kt.dot(q, keys + j * key_stride, dk) * scale;
  softmax(scratch, n);
  for (size_t j = 0; j < n; ++j) kt.axpy(scratch[j], values + j * value_stride, out, dv);
}

}  // namespace deltafin
