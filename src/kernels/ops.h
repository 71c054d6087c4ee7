// fp32 vector operations of the forward pass (k3-model.md §6, §7). "Canonical"
// means the reduction order of k3-model.md §4.4 (32 lane accumulators, lane =
// index mod 32, fma per element, then the fixed lane tree), which every ISA
// path computes bit for bit. Elementwise transcendentals (expf, tanhf) are
// portable_math.h's, shared by all paths and the same on every machine.
#pragma once

#include <cstddef>

#include "util/thread_pool.h"

namespace deltafin {

float dot(const float* a, const float* b, size_t n);  // canonical
float sum(const float* a, size_t n);                  // canonical with fma(a[i], 1, acc) = plain adds

// var = dot(x, x) / n (fp32 divide), r = 1.0f / sqrtf(var + eps),
// out[i] = w[i] * (x[i] * r), or x[i] * r when w is null. out may alias x.
void rmsnorm(const float* x, const float* w, size_t n, float eps, float* out);

// In place: m = max; e = expf(x - m); s = sum(e) (canonical); x = e / s.
void softmax(float* x, size_t n);

float sigmoid(float x);  // 1.0f / (1.0f + expf(-x))
float silu(float x);     // x * sigmoid(x)

// k3-model.md §7.6, left to right, each step rounded to fp32:
// t1 = tanhf(g / beta); t2 = t1 * beta; t3 = t2 * sigmoid(g);
// t4 = tanhf(u / beta_lin); t5 = t4 * beta_lin; out = t3 * t5
// (tanhf, and expf in sigmoid and softmax, are portable_math.h's).
void situ(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out);
// The same, elements split over `pool` (each element is computed alone, so
// the split changes no bit): three transcendentals per element made SiTU a serial
// stretch between an expert's products while the other threads waited.
void situ(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out, ThreadPool* pool);

// In place: x / max(sqrtf(dot(x, x)), floor), dividing each element.
void l2_normalize(float* x, size_t n, float floor);

// k3-model.md §7.5 step 2 for one position. Per channel c, window
// s = (state[c*kernel + 1 .. c*kernel + kernel-1], x[c]);
// out[c] = silu(((w[c*kernel]*s0 + w[c*kernel+1]*s1) + ...) + w[c*kernel+kernel-1]*s_{kernel-1})
// (products rounded, summed left to right, no fma); then state[c*kernel ..] = s.
// w is [channels, 1, kernel] as stored; state starts as zeros. out may alias x.
void short_conv_step(const float* x, const float* w, float* state, size_t channels, size_t kernel, float* out);

// One head of k3-model.md §7.5 step 7. S is [K, V] row-major (index [k, v]).
// In order: S[k,:] *= expf(g[k]); delta[j] = v[j] - sum_k k[k]*S[k,j];
// S[k,j] += (beta*k[k]) * delta[j]; o[j] = sum_k q[k]*S[k,j] — every sum
// acc = acc + a*b over k ascending (product rounded, no fma).
void kda_step(float* S, const float* q, const float* k, const float* v, const float* g, float beta, size_t K,
              size_t V, float* o);

// One head, one query over n cached positions: score_j = dot(q, key_j) * scale
// (canonical dot, then the multiply); p = softmax(score); out[i] = sum_j p_j *
// value_j[i] with acc = acc + p_j * v_j[i] over j ascending. key_j starts at
// keys + j*key_stride (dk floats), value_j at values + j*value_stride (dv
// floats); scratch holds >= n floats (it receives p). n == 0 gives zeros.
void attention(const float* q, const float* keys, size_t key_stride, const float* values, size_t value_stride,
               size_t n, size_t dk, size_t dv, float scale, float* scratch, float* out);

// y[i] = y[i] + a * x[i] (product rounded, no fma): the accumulation step of
// attention and Mix, exposed for callers that accumulate themselves.
void axpy(float a, const float* x, float* y, size_t n);

}  // namespace deltafin
