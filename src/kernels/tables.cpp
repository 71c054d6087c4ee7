// Constant decode tables shared by every path. They are constant-initialised
// data (no code runs at start-up), so the ISA-specific files can read them.
#include <array>
#include <bit>
#include <cstdint>

#include "kernels/kernel_table.h"

namespace deltafin::kernels_detail {

namespace {

constexpr std::array<float, 256> make_e8m0() {
  std::array<float, 256> t{};
  // Byte 0 is 2^-127, the fp32 subnormal with only mantissa bit 22 set; bytes
  // 1..254 are the normal powers of two whose exponent field is the byte itself.
  t[0] = std::bit_cast<float>(uint32_t{0x00400000u});
  for (uint32_t b = 1; b < 255; ++b) t[b] = std::bit_cast<float>(b << 23);
  t[255] = std::bit_cast<float>(uint32_t{0x7fc00000u});  // NaN: invalid, never imported
  return t;
}

alignas(64) constexpr std::array<float, 256> kE8M0Table = make_e8m0();
alignas(64) constexpr std::array<float, 16> kE2M1Table = {
    0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

}  // namespace

const float* const kE8M0Scale = kE8M0Table.data();
const float* const kE2M1Signed = kE2M1Table.data();

}  // namespace deltafin::kernels_detail
