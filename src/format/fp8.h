// FP8 weights as DeepSeek V3 / R1 / V3.1 and Kimi K2 release them
// (quantization_config {"quant_method": "fp8", "fmt": "e4m3",
// "weight_block_size": [128, 128]}): an F8_E4M3 `X.weight` [rows, cols] of
// e4m3fn codes and an F32 `X.weight_scale_inv` [ceil(rows/128),
// ceil(cols/128)]. The weight at (r, c) is f32(e4m3(code)) times the scale of
// block (r/128, c/128), one fp32 multiply rounded to nearest even: what
// DeepSeek's weight_dequant computes. The kernels take such a matrix as
// WeightType::FP8Block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace deltafin {

// The exact value of an e4m3fn code (OCP 8-bit floating point v1.0): bit 7
// the sign, bits 3-6 the exponent (bias 7), bits 0-2 the mantissa; exponent 0
// is subnormal (m x 2^-9), 0x7F and 0xFF are NaN, there is no infinity.
// Largest finite 0x7E = 448, smallest subnormal 0x01 = 2^-9.
float e4m3_value(uint8_t code);

// True for the two NaN codes, S.1111.111.
inline bool e4m3_is_nan(uint8_t code) { return (code & 0x7F) == 0x7F; }

// Scale blocks along one dimension of n: ceil(n / 128).
size_t fp8_scale_blocks(size_t n);

// The decoded weight at (r, c): e4m3_value(code) * scale, one rounding.
float fp8_block_weight(const uint8_t* codes, const float* scales, size_t cols, size_t r, size_t c);

// Import check of one matrix: no NaN code, and every scale finite and > 0
// (weight_scale_inv is amax / 448 of its block), and no block whose scale
// takes one of its codes past FLT_MAX. The error names `where` (file and
// tensor) and the row and column, or the scale block.
void validate_fp8_block(const uint8_t* codes, const float* scales, size_t rows, size_t cols, const std::string& where);

}  // namespace deltafin
