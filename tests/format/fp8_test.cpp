// FP8 e4m3fn decoding and the import check of DeepSeek V3 / Kimi K2 block-FP8
// weights, against hand-decoded values (hex floats, bit patterns).
#include "format/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "support/test_support.h"
#include "util/numeric.h"

using namespace deltafin;

// By hand: sign, 4 exponent bits (bias 7), 3 mantissa bits.
TEST(Fp8, E4m3CodesByHand) {
  EXPECT_EQ(e4m3_value(0x38), 1.0f);         // 0.0111.000: 2^0
  EXPECT_EQ(e4m3_value(0x01), 0x1p-9f);      // 0.0000.001: 1/8 x 2^-6, the smallest subnormal
  EXPECT_EQ(e4m3_value(0x07), 0x1.cp-7f);    // 0.0000.111: 7/8 x 2^-6, the largest subnormal
  EXPECT_EQ(e4m3_value(0x08), 0x1p-6f);      // 0.0001.000: the smallest normal
  EXPECT_EQ(e4m3_value(0x7E), 448.0f);       // 0.1111.110: 1.75 x 2^8, the largest
  EXPECT_EQ(e4m3_value(0x78), 256.0f);       // 0.1111.000: exponent 15 is a normal binade in e4m3fn
  EXPECT_EQ(e4m3_value(0x77), 240.0f);       // 0.1110.111: 1.875 x 2^7
  EXPECT_EQ(e4m3_value(0xB8), -1.0f);        // 1.0111.000
  EXPECT_EQ(e4m3_value(0xFE), -448.0f);
  EXPECT_EQ(e4m3_value(0x44), 3.0f);         // 0.1000.100: 1.5 x 2^1
  EXPECT_EQ(f32_bits(e4m3_value(0x00)), 0x00000000u);
  EXPECT_EQ(f32_bits(e4m3_value(0x80)), 0x80000000u);  // -0.0
  EXPECT_TRUE(std::isnan(e4m3_value(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_value(0xFF)));
  EXPECT_TRUE(e4m3_is_nan(0x7F) && e4m3_is_nan(0xFF));
  EXPECT_FALSE(e4m3_is_nan(0x7E) || e4m3_is_nan(0xFE) || e4m3_is_nan(0x78));
  // No infinities: every code but the two NaNs is finite.
  for (int c = 0; c < 256; ++c) {
    if (e4m3_is_nan(static_cast<uint8_t>(c))) continue;
    EXPECT_TRUE(std::isfinite(e4m3_value(static_cast<uint8_t>(c)))) << c;
  }
}

// Blocks of 128 x 128, row-major over ceil(rows/128) x ceil(cols/128), and
// one multiply rounded to nearest even.
TEST(Fp8, BlockWeightUsesItsBlockAndRoundsOnce) {
  EXPECT_EQ(fp8_scale_blocks(1), 1u);
  EXPECT_EQ(fp8_scale_blocks(128), 1u);
  EXPECT_EQ(fp8_scale_blocks(129), 2u);
  EXPECT_EQ(fp8_scale_blocks(7168), 56u);
  const size_t rows = 129, cols = 300;  // 2 x 3 blocks
  std::vector<uint8_t> codes(rows * cols, 0x38);
  const std::vector<float> scales = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(fp8_block_weight(codes.data(), scales.data(), cols, 0, 0), 1.0f);
  EXPECT_EQ(fp8_block_weight(codes.data(), scales.data(), cols, 127, 255), 2.0f);
  EXPECT_EQ(fp8_block_weight(codes.data(), scales.data(), cols, 0, 256), 3.0f);
  EXPECT_EQ(fp8_block_weight(codes.data(), scales.data(), cols, 128, 0), 4.0f);
  EXPECT_EQ(fp8_block_weight(codes.data(), scales.data(), cols, 128, 299), 6.0f);
  // 1.875 (0x3F) x (1 + 2^-23) = 1.875 + 1.875 ulp -> 1.875 + 2 ulp.
  codes[0] = 0x3F;
  const std::vector<float> s1 = {f32_from_bits(0x3F800001u), 1, 1, 1, 1, 1};
  EXPECT_EQ(fp8_block_weight(codes.data(), s1.data(), cols, 0, 0), 1.875f + 0x1p-22f);
}

namespace {

const std::string kFp8Where = "model-00007-of-000163.safetensors: tensor 'model.layers.3.mlp.experts.7.up_proj.weight'";

}  // namespace

TEST(Fp8, ValidMatrixAccepted) {
  const size_t rows = 130, cols = 200;
  std::vector<uint8_t> codes(rows * cols);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i % 127);  // 0x00..0x7E
  const std::vector<float> scales = {1e-4f, 2.5e-3f, 0x1p-140f, 3.0e30f};  // a subnormal scale is still > 0
  EXPECT_NO_THROW(validate_fp8_block(codes.data(), scales.data(), rows, cols, kFp8Where));
}

TEST(Fp8, NanCodeRefusedByPosition) {
  const size_t rows = 130, cols = 200;
  std::vector<uint8_t> codes(rows * cols, 0x38);
  const std::vector<float> scales(4, 1e-3f);
  codes[129 * cols + 150] = 0x7F;
  EXPECT_FAILS_WITH(validate_fp8_block(codes.data(), scales.data(), rows, cols, kFp8Where), kFp8Where, "row 129, column 150",
                    "code 0x7f is NaN");
  codes[129 * cols + 150] = 0x38;
  codes[3] = 0xFF;
  EXPECT_FAILS_WITH(validate_fp8_block(codes.data(), scales.data(), rows, cols, kFp8Where), kFp8Where, "row 0, column 3",
                    "code 0xff is NaN");
}

TEST(Fp8, BadScalesRefusedByBlock) {
  const size_t rows = 130, cols = 200;
  const std::vector<uint8_t> codes(rows * cols, 0x38);
  const float bad[] = {0.0f, -0.0f, -1e-3f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (float b : bad) {
    std::vector<float> scales(4, 1e-3f);
    scales[3] = b;
    EXPECT_FAILS_WITH(validate_fp8_block(codes.data(), scales.data(), rows, cols, kFp8Where), kFp8Where,
                      "scale block (1, 1) of weight_scale_inv [2, 2]", "expected a finite scale > 0");
  }
}

TEST(Fp8, OverflowingBlockRefused) {
  // 448 x 1e36 and -448 x 1e36 overflow fp32; 1.0 x 1e36 does not.
  const size_t rows = 2, cols = 130;
  std::vector<uint8_t> codes(rows * cols, 0x38);
  const std::vector<float> scales = {1.0f, 1e36f};
  EXPECT_NO_THROW(validate_fp8_block(codes.data(), scales.data(), rows, cols, kFp8Where));
  codes[1 * cols + 129] = 0xFE;
  EXPECT_FAILS_WITH(validate_fp8_block(codes.data(), scales.data(), rows, cols, kFp8Where), kFp8Where, "row 1, column 129",
                    "code 0xfe", "non-finite");
  // The same code in the block with scale 1 is fine.
  codes[1 * cols + 129] = 0x38;
  codes[1 * cols + 127] = 0xFE;
  EXPECT_NO_THROW(validate_fp8_block(codes.data(), scales.data(), rows, cols, kFp8Where));
}
