// MXFP4 decoding and import validation (k3-model.md §4.2, §4.3), checked
// against hand-written values (hex float literals, bit patterns).
#include "format/mxfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/k3_fixture.h"
#include "util/numeric.h"

using namespace deltafin;

TEST(Mxfp4, E2m1TableAtUnitScale) {
  // Scale byte 127 is 2^0: the value is the e2m1 code itself.
  const float want[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int n = 0; n < 16; ++n) {
    SCOPED_TRACE(n);
    float v = mxfp4_value(static_cast<uint8_t>(n), 127);
    EXPECT_EQ(f32_bits(v), f32_bits(want[n]));  // bitwise: distinguishes -0.0
  }
  EXPECT_TRUE(std::signbit(mxfp4_value(8, 127)));
  EXPECT_EQ(mxfp4_value(8, 127), 0.0f);
  EXPECT_FALSE(std::signbit(mxfp4_value(0, 127)));
  EXPECT_TRUE(std::signbit(mxfp4_value(8, 0)));
  EXPECT_TRUE(std::signbit(mxfp4_value(8, 254)));
}

TEST(Mxfp4, ScalesArePowersOfTwo) {
  EXPECT_EQ(mxfp4_value(7, 128), 12.0f);
  EXPECT_EQ(mxfp4_value(9, 126), -0.25f);
  EXPECT_EQ(mxfp4_value(3, 130), 12.0f);    // 1.5 * 8
  EXPECT_EQ(mxfp4_value(14, 100), -0x1p-25f);  // -4 * 2^-27
  EXPECT_EQ(mxfp4_value(2, 254), 0x1p127f);
  EXPECT_EQ(mxfp4_value(3, 254), 0x1.8p127f);  // the largest finite value in the format
  EXPECT_EQ(mxfp4_value(7, 253), INFINITY);    // 6 * 2^126 = 1.5 * 2^128 overflows
  EXPECT_EQ(mxfp4_value(5, 253), 0x1.8p127f);  // 3 * 2^126
}

TEST(Mxfp4, ScaleZeroGivesExactSubnormals) {
  // Byte 0 is 2^-127 exactly; results below 2^-126 are subnormal, never flushed.
  EXPECT_EQ(mxfp4_value(1, 0), std::ldexp(1.0f, -128));
  EXPECT_EQ(f32_bits(mxfp4_value(1, 0)), 0x00200000u);  // 2^-128 = 2^21 * 2^-149
  EXPECT_EQ(f32_bits(mxfp4_value(3, 0)), 0x00600000u);  // 1.5 * 2^-127 = 3 * 2^21 * 2^-149
  EXPECT_EQ(f32_bits(mxfp4_value(2, 0)), 0x00400000u);  // 2^-127
  EXPECT_EQ(f32_bits(mxfp4_value(4, 0)), 0x00800000u);  // 2^-126: the smallest normal
  EXPECT_EQ(mxfp4_value(7, 0), 0x1.8p-125f);            // 6 * 2^-127
  EXPECT_EQ(f32_bits(mxfp4_value(9, 0)), 0x80200000u);  // -2^-128
  EXPECT_EQ(std::fpclassify(mxfp4_value(1, 0)), FP_SUBNORMAL);
  EXPECT_EQ(mxfp4_value(1, 1), 0x1p-127f);
}

namespace {

// One matrix of `rows` x `cols` logical columns, every nibble `fill`, every scale `scale`.
struct Matrix {
  size_t rows, cols;
  std::vector<uint8_t> packed, scales;
  Matrix(size_t r, size_t c, uint8_t fill, uint8_t scale)
      : rows(r), cols(c), packed(r * c / 2, static_cast<uint8_t>(fill | (fill << 4))), scales(r * c / 32, scale) {}
  uint8_t& scale(size_t r, size_t g) { return scales[r * (cols / 32) + g]; }
  // The byte holding logical columns 2j, 2j+1 of row r.
  uint8_t& byte(size_t r, size_t j) { return packed[r * (cols / 2) + j]; }
  void validate(const std::string& where) const { validate_mxfp4(packed.data(), scales.data(), rows, cols, where); }
};

const std::string kWhere = "model-00003-of-000008.safetensors: tensor 'language_model.model.layers.4.w1'";

}  // namespace

TEST(Mxfp4, ValidDataAccepted) {
  Matrix m(3, 96, 0x7, 127);  // every weight 6.0
  m.scale(0, 0) = 0;
  m.scale(1, 2) = 252;  // 6 * 2^125 is finite
  m.scale(2, 1) = 254;  // finite as long as the group's nibbles stay <= 1.5
  for (size_t j = 16; j < 32; ++j) m.byte(2, j) = 0xB3;  // 1.5 and -1.5
  EXPECT_NO_THROW(m.validate(kWhere));
  // 253 with 3.0 (largest finite) and -0.0.
  m.scale(2, 1) = 253;
  for (size_t j = 16; j < 32; ++j) m.byte(2, j) = 0x85;
  EXPECT_NO_THROW(m.validate(kWhere));
}

TEST(Mxfp4, Scale255Refused) {
  Matrix m(4, 64, 0x0, 127);  // all zero nibbles: 255 is refused whatever the data
  m.scale(2, 1) = 255;
  EXPECT_FAILS_WITH(m.validate(kWhere), kWhere, "row 2, group 1", "scale byte 255");
  m.scale(2, 1) = 127;
  m.scale(0, 0) = 255;
  EXPECT_FAILS_WITH(m.validate(kWhere), kWhere, "row 0, group 0", "255");
}

TEST(Mxfp4, NonFiniteGroupRefused) {
  // Scale 254 with nibble 7: 6 * 2^127 overflows. Placed in the high nibble
  // of the last byte of row 1, group 1.
  Matrix m(3, 64, 0x1, 127);
  m.scale(1, 1) = 254;
  EXPECT_NO_THROW(m.validate(kWhere));  // 0.5 * 2^127 is fine
  m.byte(1, 31) = 0x71;
  EXPECT_FAILS_WITH(m.validate(kWhere), kWhere, "row 1, group 1", "scale byte 254", "nibble 7", "non-finite");
  // Low nibble, negative (-6 -> -inf), first byte of the group.
  m.byte(1, 31) = 0x11;
  m.byte(1, 16) = 0x1F;
  EXPECT_FAILS_WITH(m.validate(kWhere), kWhere, "row 1, group 1", "nibble 15", "non-finite");
  // 2.0 * 2^127 = 2^128 overflows too.
  m.byte(1, 16) = 0x41;
  EXPECT_FAILS_WITH(m.validate(kWhere), kWhere, "row 1, group 1", "nibble 4");
  // Scale 253 with 4.0: 2^128.
  m.byte(1, 16) = 0x11;
  m.scale(1, 1) = 253;
  m.byte(1, 20) = 0x16;
  EXPECT_FAILS_WITH(m.validate(kWhere), kWhere, "row 1, group 1", "scale byte 253", "nibble 6");
}

TEST(Mxfp4, GroupsMapToTheirOwnBytes) {
  // Row 1: group 0 holds large nibbles under a normal scale; group 1 holds
  // small nibbles under scale 254. Valid, unless the groups' bytes are mixed up.
  Matrix m(2, 64, 0x7, 127);
  m.scale(1, 1) = 254;
  for (size_t j = 16; j < 32; ++j) m.byte(1, j) = 0x33;
  EXPECT_NO_THROW(m.validate(kWhere));
  // The big scale on group 0 instead: refused, naming group 0.
  m.scale(1, 1) = 127;
  m.scale(1, 0) = 254;
  EXPECT_FAILS_WITH(m.validate(kWhere), kWhere, "row 1, group 0");
  // Row 0's bytes are not row 1's: the same group on row 0 with small nibbles is fine.
  Matrix n(2, 64, 0x7, 127);
  for (size_t j = 0; j < 16; ++j) n.byte(0, j) = 0x44;  // 2.0 * 2^127 overflows
  n.scale(0, 0) = 254;
  EXPECT_FAILS_WITH(n.validate(kWhere), kWhere, "row 0, group 0", "nibble 4");
  for (size_t j = 0; j < 16; ++j) n.byte(0, j) = 0x33;
  EXPECT_NO_THROW(n.validate(kWhere));
}

TEST(Mxfp4, ColumnsMustBeWholeGroups) {
  std::vector<uint8_t> packed(24), scales(2);
  EXPECT_FAILS_WITH(validate_mxfp4(packed.data(), scales.data(), 1, 48, kWhere), kWhere, "48 columns",
                    "multiple of the MXFP4 group size 32");
}
