// MXFP4 as released (k3-model.md §4): e2m1 nibbles, two per byte (low nibble =
// even column), with one e8m0 scale byte per 32 columns. Decoding is exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace deltafin {

// The e2m1 magnitudes indexed by bits 0-2; bit 3 is the sign (code 8 is -0.0).
inline constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Exact value of one weight: e2m1(nibble) * 2^(scale - 127), subnormal where due.
float mxfp4_value(uint8_t nibble, uint8_t scale);

// Import check of one matrix's scales (§4.3): byte 255 is invalid, and any group
// whose largest decoded weight is not finite is refused. The error names
// `where` (shard and tensor), the row and the group.
void validate_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const std::string& where);

}  // namespace deltafin
