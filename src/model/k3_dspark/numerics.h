// The BF16 numerics of the DSpark draft model (k3-model.md §10.2): weights
// and activations are BF16, each op's output is rounded to BF16, products
// accumulate in fp32. Activations are kept in fp32 storage holding BF16
// values, so the fp32 kernels (matmul, dot) can be used unchanged and a value
// is "cast to BF16" by rounding it in place.
#pragma once

#include <cstddef>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/kimi_k3/model.h"    // Rows
#include "model/kimi_k3/weights.h"  // Matrix
#include "util/numeric.h"

namespace deltafin {

inline float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

inline void round_bf16(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = round_bf16(x[i]);
}

// DSpark's RMSNorm: normalise in fp32, cast to BF16, then multiply by the
// BF16 weight (the product rounded to BF16 again). out may alias x.
inline void rmsnorm_bf16(const float* x, const float* w, size_t n, float eps, float* out) {
  rmsnorm(x, nullptr, n, eps, out);
  for (size_t i = 0; i < n; ++i) out[i] = round_bf16(round_bf16(out[i]) * w[i]);
}

// y = W·x for x.T rows: a BF16 linear layer (fp32 accumulation in the
// canonical kernel order, each output rounded to BF16).
inline void linear_bf16(const Matrix& w, const Rows& x, Rows& y, ThreadPool* pool) {
  y = Rows(x.T, w.rows);
  matmul(w.view(), x.v.data(), x.T, y.v.data(), pool);
  round_bf16(y.v.data(), y.v.size());
}

}  // namespace deltafin
