// expf and tanhf with the same bits on every machine. The forward pass calls
// them for every activation (SiTU, SiLU's sigmoid, softmax, the KDA decay),
// so the library they come from decides the logits' last bits. glibc's differ
// between machines: 2.36's tanhf (on expm1f) gives other bits on AArch64
// than on x86-64 for about 1 float in 770 in [1/16, 4), and x86-64 glibc picks
// FMA or non-FMA builds of expf by CPU. These use only +, -, *, /, a table
// lookup and exact scaling in double (IEEE-754 fixes each result; the build's
// -ffp-contract=off keeps them unfused) and round once to float, so an ARM64
// run's logits equal an x86-64 run's byte for byte (scripts/test-arm64.sh).
// Before that rounding they are within about 1e-11 (relative) of the exact
// value, so the float is the correctly rounded one except where the exact
// value lies that close to a rounding boundary. They cost a few ns: SiTU calls
// three per MoE activation, so a slow form shows in decode speed.
#pragma once

namespace deltafin {

float portable_expf(float x);   // e^x; NaN -> NaN, +inf -> +inf, -inf -> +0
float portable_tanhf(float x);  // tanh(x); NaN -> NaN, +-inf -> +-1, odd

namespace kernels_detail {
// The 32 doubles 2^(j/32) both functions scale by: SIMD copies of them
// (ops_avx512.cpp's situ) read the same table, operation for operation.
extern const double* const kPortableExp2Table;
// exp_reduced's other constants, in this order: 32 / ln2, ln2 / 32 in a high
// part (21 significant bits) and a low part, and the Taylor coefficients
// 1/6, 1/24, 1/120 (a device backend computes the same steps from them).
extern const double* const kPortableExpConstants;
}  // namespace kernels_detail

}  // namespace deltafin
