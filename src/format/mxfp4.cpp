#include "format/mxfp4.h"

#include <cmath>

#include "util/error.h"

namespace deltafin {

float mxfp4_value(uint8_t nibble, uint8_t scale) {
  float m = kE2M1[nibble & 7];
  float v = std::ldexp(m, static_cast<int>(scale) - 127);
  return (nibble & 8) ? -v : v;
}

void validate_mxfp4(const uint8_t* packed, const uint8_t* scales, size_t rows, size_t cols, const std::string& where) {
  if (cols % 32 != 0) fail(where, ": ", cols, " columns is not a multiple of the MXFP4 group size 32");
  const size_t groups = cols / 32;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t g = 0; g < groups; ++g) {
      uint8_t s = scales[r * groups + g];
      if (s == 255) fail(where, ": row ", r, ", group ", g, ": scale byte 255 is NaN in e8m0 and cannot be a weight");
      if (s < 253) continue;  // 6 * 2^125 is finite: only 253 and 254 can overflow
      const uint8_t* p = packed + r * (cols / 2) + g * 16;
      for (size_t j = 0; j < 16; ++j)
        for (uint8_t nib : {static_cast<uint8_t>(p[j] & 15), static_cast<uint8_t>(p[j] >> 4)})
          if (!std::isfinite(mxfp4_value(nib, s)))
            fail(where, ": row ", r, ", group ", g, ": scale byte ", int(s), " with nibble ", int(nib),
                 " decodes to a non-finite weight");
    }
  }
}

}  // namespace deltafin
