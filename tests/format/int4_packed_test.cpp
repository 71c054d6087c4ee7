// compressed-tensors pack-quantized INT4 (Kimi K2-Thinking's experts): the
// nibble layout of the I32 words, the decode, packing and the import check,
// against hand-written words and values.
#include "format/int4_packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "support/test_support.h"
#include "util/error.h"
#include "util/numeric.h"

using namespace deltafin;

namespace {

// The bytes of little-endian I32 words, as a safetensors file holds them.
std::vector<uint8_t> le_bytes(const std::vector<uint32_t>& words) {
  std::vector<uint8_t> out;
  for (uint32_t w : words)
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(w >> (8 * b)));
  return out;
}

const std::string kInt4Where = "model-00012-of-000062.safetensors: tensor 'model.layers.9.mlp.experts.100.down_proj'";

}  // namespace

// Column 8j + k is nibble k (bits 4k..4k+3) of word j; u - 8 is the value.
TEST(Int4Packed, NibblesAndValuesByHand) {
  EXPECT_EQ(int4_value(0), -8);
  EXPECT_EQ(int4_value(8), 0);
  EXPECT_EQ(int4_value(15), 7);
  EXPECT_EQ(int4_value(7), -1);
  const size_t cols = 32;
  std::vector<uint32_t> words = {0x76543210u, 0xFEDCBA98u, 0x88888888u, 0x1000000Fu};
  const std::vector<uint8_t> packed = le_bytes(words);
  for (size_t c = 0; c < 16; ++c) EXPECT_EQ(int4_nibble(packed.data(), cols, 0, c), c) << c;
  EXPECT_EQ(int4_nibble(packed.data(), cols, 0, 24), 15u);  // word 3, nibble 0
  EXPECT_EQ(int4_nibble(packed.data(), cols, 0, 31), 1u);   // word 3, nibble 7 (the top)
  const std::vector<uint16_t> scales = {0x3E00};            // bf16 0.125
  EXPECT_EQ(int4_group32_weight(packed.data(), scales.data(), cols, 0, 0), -1.0f);      // -8 x 0.125
  EXPECT_EQ(int4_group32_weight(packed.data(), scales.data(), cols, 0, 15), 0.875f);    // 7 x 0.125
  EXPECT_EQ(int4_group32_weight(packed.data(), scales.data(), cols, 0, 31), -0.875f);   // -7 x 0.125
  EXPECT_EQ(f32_bits(int4_group32_weight(packed.data(), scales.data(), cols, 0, 16)), 0u);  // u = 8: +0
}

// One scale per 32 columns of a row, [rows, cols/32] row-major; q x scale is
// exact, subnormal bf16 scales included.
TEST(Int4Packed, GroupsTakeTheirOwnScales) {
  const size_t rows = 2, cols = 64;
  std::vector<uint32_t> words(rows * cols / 8, 0xFFFFFFFFu);  // every value 7
  const std::vector<uint8_t> packed = le_bytes(words);
  const std::vector<uint16_t> scales = {0x3F80, 0x4000, 0x0001, 0x7F7F};  // 1, 2, 2^-133, the largest bf16
  EXPECT_EQ(int4_group32_weight(packed.data(), scales.data(), cols, 0, 31), 7.0f);
  EXPECT_EQ(int4_group32_weight(packed.data(), scales.data(), cols, 0, 32), 14.0f);
  EXPECT_EQ(int4_group32_weight(packed.data(), scales.data(), cols, 1, 0), 7 * 0x1p-133f);
  EXPECT_EQ(int4_group32_weight(packed.data(), scales.data(), cols, 1, 63), INFINITY);  // 7 x 3.39e38
}

TEST(Int4Packed, PackIsTheInverseOfTheDecode) {
  // q = -8..7 in columns 0..15 packs to words 0x76543210, 0xFEDCBA98.
  std::vector<int8_t> q(16);
  for (int i = 0; i < 16; ++i) q[i] = static_cast<int8_t>(i - 8);
  EXPECT_EQ(pack_int4(q, 1, 16), le_bytes({0x76543210u, 0xFEDCBA98u}));
  // A random matrix round-trips through int4_nibble.
  const size_t rows = 3, cols = 96;
  std::vector<int8_t> r(rows * cols);
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int8_t>(static_cast<int>((i * 7919) % 16) - 8);
  const std::vector<uint8_t> packed = pack_int4(r, rows, cols);
  ASSERT_EQ(packed.size(), rows * cols / 2);
  for (size_t row = 0; row < rows; ++row)
    for (size_t c = 0; c < cols; ++c)
      ASSERT_EQ(int4_value(int4_nibble(packed.data(), cols, row, c)), r[row * cols + c]) << row << ", " << c;
}

TEST(Int4Packed, PackRefusesBadInput) {
  std::vector<int8_t> q(2 * 16, 0);
  q[16 + 5] = 8;
  EXPECT_FAILS_WITH(pack_int4(q, 2, 16), "pack_int4", "row 1, column 5", "8 is outside -8..7");
  q[16 + 5] = -9;
  EXPECT_FAILS_WITH(pack_int4(q, 2, 16), "row 1, column 5", "-9");
  std::vector<int8_t> twelve(12, 0);
  EXPECT_FAILS_WITH(pack_int4(twelve, 1, 12), "pack_int4", "12 columns is not a multiple of 8");
  EXPECT_FAILS_WITH(pack_int4(twelve, 1, 16), "12 values for [1, 16]");
}

TEST(Int4Packed, ValidationNamesTheTensor) {
  const size_t rows = 3, cols = 64;
  const std::vector<uint8_t> packed(rows * cols / 2, 0x00);  // every value -8
  std::vector<uint16_t> scales(rows * 2, 0x3C23);            // bf16 0.00995
  EXPECT_NO_THROW(validate_int4_group32(packed.data(), scales.data(), rows, cols, kInt4Where));
  scales[1] = 0x0001;  // a subnormal scale is > 0: accepted
  EXPECT_NO_THROW(validate_int4_group32(packed.data(), scales.data(), rows, cols, kInt4Where));
  const uint16_t bad[] = {0x0000, 0x8000, 0xBC23, 0x7F80, 0x7FC0};  // +0, -0, negative, +inf, NaN
  for (uint16_t b : bad) {
    scales[5] = b;
    EXPECT_FAILS_WITH(validate_int4_group32(packed.data(), scales.data(), rows, cols, kInt4Where), kInt4Where,
                      "row 2, group 1", "expected a finite scale > 0");
  }
  scales[5] = 0x3C23;
  EXPECT_FAILS_WITH(validate_int4_group32(packed.data(), scales.data(), rows, 48, kInt4Where), kInt4Where, "48 columns",
                    "multiple of the INT4 group size 32");
}

TEST(Int4Packed, OverflowingGroupRefused) {
  // The largest finite bf16 (0x7F7F, about 3.39e38): -8 and 7 times it
  // overflow, 0 does not.
  const size_t rows = 1, cols = 64;
  std::vector<uint8_t> packed(cols / 2, 0x88);  // every value 0
  const std::vector<uint16_t> scales = {0x3F80, 0x7F7F};
  EXPECT_NO_THROW(validate_int4_group32(packed.data(), scales.data(), rows, cols, kInt4Where));
  packed[31] = 0xF8;  // column 63: u = 15, value 7
  EXPECT_FAILS_WITH(validate_int4_group32(packed.data(), scales.data(), rows, cols, kInt4Where), kInt4Where, "row 0, group 1",
                    "value 7", "non-finite");
  packed[31] = 0x88;
  packed[0] = 0x00;  // columns 0, 1 in group 0 under scale 1: fine
  EXPECT_NO_THROW(validate_int4_group32(packed.data(), scales.data(), rows, cols, kInt4Where));
}
