#include "format/fp8.h"

#include <cmath>
#include <limits>

#include "util/error.h"

namespace deltafin {

namespace {

std::string hex_byte(uint8_t b) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

}  // namespace

float e4m3_value(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e4m3_is_nan(code)) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude =
      e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), e - 10);
  return (code & 0x80) ? -magnitude : magnitude;
}

size_t fp8_scale_blocks(size_t n) { return (n + 127) / 128; }

float fp8_block_weight(const uint8_t* codes, const float* scales, size_t cols, size_t r, size_t c) {
  return e4m3_value(codes[r * cols + c]) * scales[(r / 128) * fp8_scale_blocks(cols) + c / 128];
}

void validate_fp8_block(const uint8_t* codes, const float* scales, size_t rows, size_t cols, const std::string& where) {
  const size_t block_rows = fp8_scale_blocks(rows), block_cols = fp8_scale_blocks(cols);
  for (size_t br = 0; br < block_rows; ++br)
    for (size_t bc = 0; bc < block_cols; ++bc) {
      const float s = scales[br * block_cols + bc];
      if (!std::isfinite(s) || !(s > 0.0f))
        fail(where, ": scale block (", br, ", ", bc, ") of weight_scale_inv [", block_rows, ", ", block_cols,
             "] is ", s, ", expected a finite scale > 0");
    }
  for (size_t r = 0; r < rows; ++r) {
    const float* block_scales = scales + (r / 128) * block_cols;
    for (size_t c = 0; c < cols; ++c) {
      const uint8_t code = codes[r * cols + c];
      if (e4m3_is_nan(code))
        fail(where, ": row ", r, ", column ", c, ": code ", hex_byte(code), " is NaN in e4m3fn and cannot be a weight");
      // 448 * scale is finite unless the scale is past FLT_MAX / 448: only
      // then can a code overflow, so only then is the product computed.
      if (block_scales[c / 128] > std::numeric_limits<float>::max() / 448.0f &&
          !std::isfinite(e4m3_value(code) * block_scales[c / 128]))
        fail(where, ": row ", r, ", column ", c, ": code ", hex_byte(code), " times scale ", block_scales[c / 128],
             " decodes to a non-finite weight");
    }
  }
}

}  // namespace deltafin
