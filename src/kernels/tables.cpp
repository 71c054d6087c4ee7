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

// e4m3fn (OCP 8-bit floating point v1.0): bit 7 the sign, bits 3-6 the
// exponent (bias 7), bits 0-2 the mantissa. Exponent 0 is subnormal, m x 2^-9;
// otherwise (8 + m) x 2^(e - 10). Every value has at most four significant
// bits, so each entry is exact. S.1111.111 (0x7F, 0xFF) is NaN; there is no
// infinity. 0x80 is -0.0.
constexpr float pow2(int e) {
  float p = 1.0f;
  for (; e > 0; --e) p *= 2.0f;
  for (; e < 0; ++e) p *= 0.5f;
  return p;
}

constexpr std::array<float, 256> make_e4m3() {
  std::array<float, 256> t{};
  for (uint32_t code = 0; code < 256; ++code) {
    const int e = static_cast<int>((code >> 3) & 15), m = static_cast<int>(code & 7);
    float v = e == 0 ? static_cast<float>(m) * pow2(-9) : static_cast<float>(8 + m) * pow2(e - 10);
    if (e == 15 && m == 7) v = std::bit_cast<float>(uint32_t{0x7fc00000u});
    t[code] = (code & 0x80) ? -v : v;
  }
  return t;
}

alignas(64) constexpr std::array<float, 256> kE4M3Table = make_e4m3();

// compressed-tensors' symmetric int4: nibble u is the value u - 8.
alignas(64) constexpr std::array<float, 16> kInt4Table = {-8.0f, -7.0f, -6.0f, -5.0f, -4.0f, -3.0f, -2.0f, -1.0f,
                                                          0.0f,  1.0f,  2.0f,  3.0f,  4.0f,  5.0f,  6.0f,  7.0f};

}  // namespace

const float* const kE2M1ByScale = kE2M1ByScaleTable.data();
const float* const kE8M0Scale = kE8M0Table.data();
const float* const kE2M1Signed = kE2M1Table.data();
const float* const kE4M3 = kE4M3Table.data();
const float* const kInt4Signed = kInt4Table.data();

// The paths read Int4Group32's uint32 words as bytes (byte i of a row holds
// columns 2i and 2i + 1, low nibble first), which is their order only on a
// little-endian machine; both targets (x86-64, AArch64 Linux) are.
static_assert(std::endian::native == std::endian::little, "Int4Group32 decoding assumes little-endian words");

}  // namespace deltafin::kernels_detail
