// Matrix-vector(s) product over any weight storage type, in the canonical
// reduction order of k3-model.md §4.4: for each output, 32 lane accumulators
// (lane = column mod 32), column c ascending does acc[c % 32] = fma(w_c, x_c,
// acc[c % 32]), then the fixed lane tree. Each output is exactly one such
// reduction whatever T, the thread count or the ISA path (scalar, AVX2,
// AVX-512, NEON), so all of those give bit-identical results.
#pragma once

#include <cstddef>
#include <functional>

#include "kernels/weights.h"
#include "util/thread_pool.h"

namespace deltafin {

// An error naming the weight unless a product can use it: a known type,
// data (and scales where the type has them), whole 32-column groups for
// MXFP4 and INT4-group-32. Every backend checks this before a product.
void check_weight(const WeightView& w);

// Y[t*rows + r] = sum_c W[r,c] * X[t*cols + c] for t in [0, T): X is [T, cols],
// Y is [T, rows], both fp32 row-major (Y must not overlap X).
// - BF16 is widened exactly, F32 used as stored, MXFP4 decoded exactly
//   (e2m1 x 2^(scale-127)); the fma runs on the decoded weight.
// - Int8Row: the canonical dot of x with the int8 values (as floats), then
//   multiplied by f32(f16 scale of the row) (k3-model.md §5.2).
// - FP8Block: the fma runs on f32(e4m3) * block scale, that product rounded
//   once (the definition's decoded weight); Int4Group32 decoded exactly
//   ((u - 8) * f32(bf16 scale)).
// - MXFP4 and Int4Group32 need cols % 32 == 0 (deltafin::Error otherwise); the
//   others take any cols.
// Work is split by output rows over `pool` (nullptr = the calling thread). For
// T > 1 each block of weights is decoded once and reused for all T rows.
void matmul(const WeightView& w, const float* x, size_t T, float* y, ThreadPool* pool = nullptr);

// ya = a x and yb = b x for two weights over the same input (a gate and an up
// projection): the same results as two matmul() calls, bit for bit, in one
// parallel_for instead of two, so the threads meet once. The weights must
// have the same cols (deltafin::Error otherwise).
void matmul_pair(const WeightView& a, const WeightView& b, const float* x, size_t T, float* ya, float* yb,
                 ThreadPool* pool = nullptr);

// The pair for a gated MLP, whose activation is elementwise: a and b must have
// the same shape (deltafin::Error otherwise). Each thread computes the same
// output rows [row_begin, row_end) of both products, for all T inputs, then
// calls then(row_begin, row_end) on them, so the activation runs inside the
// products' one parallel_for instead of taking a hand-off of its own (at
// decode a K3 expert's three hand-offs become two). Row ranges are disjoint
// and together cover [0, a.rows); the products' bits are matmul()'s.
void matmul_pair(const WeightView& a, const WeightView& b, const float* x, size_t T, float* ya, float* yb,
                 ThreadPool* pool, FunctionRef<void(size_t row_begin, size_t row_end)> then);

}  // namespace deltafin
