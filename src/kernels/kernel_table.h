// Internal: the per-ISA kernel entry points behind the public API in matmul.h
// and ops.h. One table per path (scalar, AVX2, AVX-512, NEON); dispatch.cpp
// picks one from active_isa(). A build has scalar plus its target's paths:
// AVX2 and AVX-512 on x86-64, NEON on AArch64.
//
// The AVX2 and AVX-512 tables live in files compiled with -mavx2/-mavx512*
// flags. To keep the rest of the binary runnable on any x86-64, those files
// must not emit code that baseline files could end up calling: they define
// their helpers in anonymous namespaces, use no inline functions or templates
// from shared headers (no std::vector, std::fma, std::min, ...), and have no
// dynamic initialisers. This header therefore holds only declarations and
// constants. (NEON is baseline AArch64, so its files have no such hazard; they
// follow the same rules anyway, so the paths read alike.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace deltafin::kernels_detail {

// Batched products (T > 1) decode kRowTile rows x kColBlock columns of weights
// into fp32 scratch, then run every x row over that block from cache: each
// weight byte is read and decoded once per batch.
constexpr size_t kRowTile = 4;
constexpr size_t kColBlock = 512;  // multiple of 32

// Streaming loops (the T = 1 products, dot, sum) prefetch this many bytes of
// traffic ahead. The hardware prefetchers alone left single-thread streams
// 20-40 % below the achievable read bandwidth on the reference machine
// (bench/results/2026-11-29-kernels.md); of 0.5-16 KiB, 4 KiB did best.
constexpr size_t kPrefetchBytes = 4096;

// Scratch floats one thread needs for a product over T rows: the decoded block,
// 32 lane accumulators per (row in tile, x row), then x_stride floats for each
// of kRelayoutRows x rows, which a path may use to re-lay x out (AVX-512 MXFP4
// splits the x rows of one run into even/odd columns).
constexpr size_t kScratchFixed = kRowTile * kColBlock;
constexpr size_t kScratchPerT = kRowTile * 32;
constexpr size_t kRelayoutRows = 4;
// The most rows one product call works on at once (matmul.cpp splits longer
// calls): a prefill slice (kDefaultPrefillChunk, 128) fits in one.
constexpr size_t kMaxRowsPerCall = 256;

// e8m0 byte -> 2^(byte - 127) as fp32: exact for 0..254 (byte 0 is the
// subnormal 2^-127); 255 (invalid, rejected at import) maps to NaN.
extern const float* const kE8M0Scale;

// The e2m1 code -> value table, sign included (code 8 = -0.0).
extern const float* const kE2M1Signed;

// kE2M1Signed scaled by each e8m0 byte: 256 rows of 16 floats, 64-byte
// aligned; row s is kE2M1Signed[c] * kE8M0Scale[s] (bit for bit the
// product). A decode loads its group's row instead of multiplying: a load
// port is free where the vector pipes are the bound.
extern const float* const kE2M1ByScale;

// e4m3fn code -> value as fp32, exact (subnormals included, 0x80 = -0.0);
// the NaN codes 0x7F and 0xFF (rejected at import) map to NaN. FP8Block's
// weight is this value times its block's fp32 scale: one rounded multiply.
extern const float* const kE4M3;

// Int4Group32's nibble u -> u - 8 as fp32 (16 entries, 64-byte aligned).
extern const float* const kInt4Signed;

// The SIMD paths decode e4m3 without a lookup. For a code b sign-extended to
// 32 bits, (b << 20) & kE4M3Bits places the sign at bit 31, the 4 exponent
// bits at 23-26 and the 3 mantissa bits at 20-22: as an fp32 that is the
// code's value times 2^-120, exactly (exponent 0 lands on fp32 subnormals
// with the same scaling). The group's scale times kE4M3Rescale (2^120) is
// exact unless it overflows (|scale| >= 2^8), so one multiply of the two
// rounds the exact product e4m3 x scale once: the definition's weight,
// kE4M3[b] x scale bit for bit, in one multiply per weight. (An fp16 route,
// converting in hardware with vcvtph2ps, was 20 % slower on Zen 4.) A group
// holding a NaN code (b & 0x7F == 0x7F), or whose scale x 2^120 is not
// finite, is decoded from kE4M3 instead: every byte and scale gives the
// table's bits on every path.
constexpr uint32_t kE4M3Bits = 0x87F00000u;
constexpr float kE4M3Rescale = 0x1p120f;

struct KernelTable {
  // Rows [row_begin, row_end) of Y = W X for T rows of X. X is [T, x_stride]
  // where x_stride = cols rounded up to a multiple of 32 and the padding
  // columns hold -0.0f (so a padded product w*x with w = +0 is -0.0, which
  // leaves every accumulator bit-unchanged). Y is [T, w.rows]. scratch holds
  // kScratchFixed + kScratchPerT * T + x_stride floats private to the calling
  // thread, 64-byte aligned.
  void (*matmul_rows)(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y,
                      size_t row_begin, size_t row_end, float* scratch);
  float (*dot)(const float* a, const float* b, size_t n);  // canonical order
  float (*sum)(const float* a, size_t n);                  // canonical order, plain adds
  // out[i] = w[i] * (x[i] * r), or x[i] * r when w is null.
  void (*scale_mul)(const float* x, float r, const float* w, size_t n, float* out);
  // y[i] = y[i] + a * x[i], the product rounded first (no fma).
  void (*axpy)(float a, const float* x, float* y, size_t n);
  // kda_step after the per-key factors are known: decay[k] = expf(g[k]),
  // bk[k] = beta * k[k]. Same operation order as ops.h documents.
  void (*kda_core)(float* S, const float* q, const float* k, const float* v, const float* decay,
                   const float* bk, size_t K, size_t V, float* o);
  // ops.h's situ for n elements: the same operations per element (portable
  // tanhf and expf included), so every path gives the same bits.
  void (*situ)(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out);
};

// The scalar situ, which the paths without their own point at.
void situ_scalar(const float* g, const float* u, size_t n, float beta, float beta_lin, float* out);

// The fixed lane tree of k3-model.md §4.4 over 32 lane accumulators: eight
// 4-lane vectors a0..a7, b = (a0+a1, a2+a3, a4+a5, a6+a7), c = (b0+b1, b2+b3),
// v = c0+c1, result (v0+v1)+(v2+v3). Scalar reference form (the SIMD paths do
// the same additions in registers).
float lane_tree(const float* acc32);

// Row products per path (matmul_<isa>.cpp); the tables below point at them.
void matmul_rows_scalar(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y,
                        size_t row_begin, size_t row_end, float* scratch);
void matmul_rows_avx2(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y,
                      size_t row_begin, size_t row_end, float* scratch);
void matmul_rows_avx512(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y,
                        size_t row_begin, size_t row_end, float* scratch);
void matmul_rows_neon(const WeightView& w, const float* x, size_t x_stride, size_t T, float* y,
                      size_t row_begin, size_t row_end, float* scratch);

extern const KernelTable kScalarKernels;
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;
extern const KernelTable kNeonKernels;

}  // namespace deltafin::kernels_detail
