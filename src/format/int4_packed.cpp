#include "format/int4_packed.h"

#include <cmath>

#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

uint8_t int4_nibble(const uint8_t* packed, size_t cols, size_t r, size_t c) {
  const uint8_t* word = packed + 4 * ((r * cols + c) / 8);
  const uint32_t w = uint32_t{word[0]} | uint32_t{word[1]} << 8 | uint32_t{word[2]} << 16 | uint32_t{word[3]} << 24;
  return static_cast<uint8_t>((w >> (4 * (c % 8))) & 15);
}

float int4_group32_weight(const uint8_t* packed, const uint16_t* scales, size_t cols, size_t r, size_t c) {
  const float scale = bf16_to_f32(scales[r * (cols / kInt4GroupSize) + c / kInt4GroupSize]);
  return static_cast<float>(int4_value(int4_nibble(packed, cols, r, c))) * scale;
}

std::vector<uint8_t> pack_int4(std::span<const int8_t> q, size_t rows, size_t cols) {
  if (cols % 8 != 0) fail("pack_int4: ", cols, " columns is not a multiple of 8 (one I32 word holds 8 values)");
  if (q.size() != rows * cols) fail("pack_int4: ", q.size(), " values for [", rows, ", ", cols, "]");
  std::vector<uint8_t> out(rows * cols / 2);
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < cols / 8; ++j) {
      uint32_t word = 0;
      for (size_t k = 0; k < 8; ++k) {
        const int v = q[r * cols + 8 * j + k];
        if (v < -8 || v > 7) fail("pack_int4: row ", r, ", column ", 8 * j + k, ": ", v, " is outside -8..7");
        word |= static_cast<uint32_t>(v + 8) << (4 * k);
      }
      uint8_t* at = out.data() + 4 * (r * cols / 8 + j);
      for (size_t b = 0; b < 4; ++b) at[b] = static_cast<uint8_t>(word >> (8 * b));
    }
  return out;
}

void validate_int4_group32(const uint8_t* packed, const uint16_t* scales, size_t rows, size_t cols,
                           const std::string& where) {
  if (cols % kInt4GroupSize != 0)
    fail(where, ": ", cols, " columns is not a multiple of the INT4 group size ", kInt4GroupSize);
  const size_t groups = cols / kInt4GroupSize;
  for (size_t r = 0; r < rows; ++r)
    for (size_t g = 0; g < groups; ++g) {
      const float s = bf16_to_f32(scales[r * groups + g]);
      if (!std::isfinite(s) || !(s > 0.0f))
        fail(where, ": row ", r, ", group ", g, ": scale ", s, ", expected a finite scale > 0");
      // |q| <= 8, so only a scale past FLT_MAX / 8 can overflow; only then
      // are the group's values decoded.
      if (s <= 0x1p124f) continue;
      for (size_t c = g * kInt4GroupSize; c < (g + 1) * kInt4GroupSize; ++c)
        if (!std::isfinite(int4_group32_weight(packed, scales, cols, r, c)))
          fail(where, ": row ", r, ", group ", g, ": value ", int4_value(int4_nibble(packed, cols, r, c)),
               " times scale ", s, " decodes to a non-finite weight");
    }
}

}  // namespace deltafin
