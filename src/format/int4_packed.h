// INT4 weights as Kimi K2-Thinking releases its routed experts:
// compressed-tensors "pack-quantized", symmetric, strategy "group", group
// size 32. `X.weight_packed` is I32 [rows, cols/8]: column 8j + k of a row is
// nibble k (bits 4k..4k+3) of the row's word j, holding u, and the value is
// q = u - 8 (-8..7). `X.weight_scale` is BF16 [rows, cols/32], one scale per
// 32 columns. The weight is q * f32(scale), exact (at most 4 x 8 significant
// bits). The kernels take such a matrix as WeightType::Int4Group32.
//
// `packed` below is the I32 tensor's bytes as the file holds them:
// little-endian words, read byte by byte, so neither the host's byte order
// nor the bytes' alignment matters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deltafin {

inline constexpr size_t kInt4GroupSize = 32;

// The stored nibble u (0..15) of column c of row r.
uint8_t int4_nibble(const uint8_t* packed, size_t cols, size_t r, size_t c);

// u - 8.
inline int int4_value(uint8_t nibble) { return static_cast<int>(nibble & 15) - 8; }

// The decoded weight at (r, c): (u - 8) * f32(bf16 scale of its group), exact.
float int4_group32_weight(const uint8_t* packed, const uint16_t* scales, size_t cols, size_t r, size_t c);

// The inverse of the decode's first step: q (rows x cols, row-major, each in
// -8..7) as the bytes of the I32 [rows, cols/8] tensor pack-quantized writes.
// cols must be a multiple of 8 and q hold rows * cols values; Error otherwise,
// and for a value out of range (naming its row and column).
std::vector<uint8_t> pack_int4(std::span<const int8_t> q, size_t rows, size_t cols);

// Import check of one matrix: cols a multiple of 32 (the group size), every
// scale finite and > 0, and no group whose scale takes one of its values past
// FLT_MAX. The error names `where` (file and tensor), the row and the group.
void validate_int4_group32(const uint8_t* packed, const uint16_t* scales, size_t rows, size_t cols,
                           const std::string& where);

}  // namespace deltafin
