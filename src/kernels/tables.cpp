// Constant decode tables shared by every path. They are constant-initialised
// data (no code runs at start-up), so the ISA-specific files can read them.
#include <array>
#include <bit>
#include <cstdint>
#include <limits>

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

// Every scale's e2m1 table: entry 16*s + c is kE2M1Table[c] * kE8M0Table[s],
// the product the decode would otherwise compute per group. Each is exact
// (a power of two times a value of at most two significant bits, subnormal
// or infinite where the runtime multiply is too); byte 255's row is the NaN
// of kE8M0Table, as the runtime multiply returns it.
// v * scale rounded as fp32 multiplication rounds it; a constant expression
// may not overflow, so the products past FLT_MAX are written as the infinity
// the multiply gives (no product here is inexact otherwise).
constexpr float scaled(float v, float scale) {
  double exact = double(v) * double(scale);
  if (exact > double(std::numeric_limits<float>::max())) return std::numeric_limits<float>::infinity();
  if (exact < -double(std::numeric_limits<float>::max())) return -std::numeric_limits<float>::infinity();
  return v * scale;
}

constexpr std::array<float, 256 * 16> make_e2m1_by_scale() {
  std::array<float, 256 * 16> t{};
  for (size_t s = 0; s < 256; ++s)
    for (size_t c = 0; c < 16; ++c)
      t[16 * s + c] = s == 255 ? kE8M0Table[255] : scaled(kE2M1Table[c], kE8M0Table[s]);
  return t;
}

alignas(64) constexpr std::array<float, 256 * 16> kE2M1ByScaleTable = make_e2m1_by_scale();

}  // namespace

const float* const kE2M1ByScale = kE2M1ByScaleTable.data();
const float* const kE8M0Scale = kE8M0Table.data();
const float* const kE2M1Signed = kE2M1Table.data();

}  // namespace deltafin::kernels_detail
