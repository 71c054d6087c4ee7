// Exact weight decode (k3-model.md §4.2-4.3, §5.2) against hand-decoded values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/weights.h"

using namespace deltafin;
using namespace deltafin::test;

namespace {

WeightView mxfp4_view(const std::vector<uint8_t>& packed, const std::vector<uint8_t>& scales, size_t rows, size_t cols) {
  WeightView w;
  w.type = WeightType::MXFP4;
  w.rows = rows;
  w.cols = cols;
  w.data = packed.data();
  w.scales = scales.data();
  return w;
}

}  // namespace

TEST(WeightAt, Mxfp4CodesAndPacking) {
  // Row of 32 columns: byte j holds column 2j (low nibble) and 2j+1 (high).
  // Column c gets code c % 16: bytes are 0x10, 0x32, 0x54, ... 0xFE, twice.
  std::vector<uint8_t> packed(16), scales = {127};
  for (int j = 0; j < 16; ++j) packed[j] = static_cast<uint8_t>(((2 * j + 1) % 16) << 4 | ((2 * j) % 16));
  WeightView w = mxfp4_view(packed, scales, 1, 32);
  const float expected[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (size_t c = 0; c < 32; ++c) {
    float v = weight_at(w, 0, c);
    EXPECT_EQ(v, expected[c % 16]) << "column " << c;
    EXPECT_EQ(std::signbit(v), std::signbit(expected[c % 16])) << "column " << c;
  }
  // Code 8 is negative zero, not +0.
  EXPECT_TRUE(std::signbit(weight_at(w, 0, 8)));
  EXPECT_FALSE(std::signbit(weight_at(w, 0, 0)));
}

TEST(WeightAt, Mxfp4ScalesIncludingSubnormal) {
  // Column 0 = code 1 (0.5), column 1 = code 7 (6.0), column 2 = code 3 (1.5),
  // column 3 = code 0xA (-1.0); one row per scale byte under test.
  const uint8_t bytes[2] = {0x71, 0xA3};
  const uint8_t scale_bytes[] = {0, 1, 126, 127, 128, 200, 252, 254};
  std::vector<uint8_t> packed, scales;
  for (uint8_t s : scale_bytes) {
    for (int j = 0; j < 16; ++j) packed.push_back(bytes[j % 2]);
    scales.push_back(s);
  }
  WeightView w = mxfp4_view(packed, scales, std::size(scale_bytes), 32);
  // Hand-decoded: e2m1 x 2^(byte - 127), written as hex floats.
  const float expect[][4] = {
      {0x1p-128f, 0x1.8p-125f, 0x1.8p-127f, -0x1p-127f},  // byte 0: 2^-127, results subnormal
      {0x1p-127f, 0x1.8p-124f, 0x1.8p-126f, -0x1p-126f},  // byte 1
      {0.25f, 3.0f, 0.75f, -0.5f},                        // byte 126
      {0.5f, 6.0f, 1.5f, -1.0f},                          // byte 127
      {1.0f, 12.0f, 3.0f, -2.0f},                         // byte 128
      {0x1p72f, 0x1.8p75f, 0x1.8p73f, -0x1p73f},          // byte 200
      {0x1p124f, 0x1.8p127f, 0x1.8p125f, -0x1p125f},      // byte 252
      {0x1p126f, INFINITY, 0x1.8p127f, -0x1p127f},        // byte 254: 6 * 2^127 overflows
  };
  for (size_t r = 0; r < std::size(scale_bytes); ++r)
    for (size_t c = 0; c < 4; ++c) EXPECT_EQ(weight_at(w, r, c), expect[r][c]) << "scale " << int(scale_bytes[r]) << " col " << c;
  EXPECT_TRUE(std::fpclassify(weight_at(w, 0, 0)) == FP_SUBNORMAL);
  // The scale applies per 32-column group: a second group with its own byte.
  std::vector<uint8_t> p2(32, 0x22), s2 = {127, 130};  // code 2 = 1.0 everywhere
  WeightView w2 = mxfp4_view(p2, s2, 1, 64);
  EXPECT_EQ(weight_at(w2, 0, 31), 1.0f);
  EXPECT_EQ(weight_at(w2, 0, 32), 8.0f);
}

TEST(WeightAt, Int8RowUsesTheHalfScale) {
  std::vector<int8_t> q = {-127, 0, 1, 127, 3, -3};
  // f16 0x2E66 = 1638 / 16384 = 0.0999755859375; f16 0x0001 = 2^-24 (subnormal).
  std::vector<uint16_t> s = {0x2E66, 0x0001};
  WeightView w;
  w.type = WeightType::Int8Row;
  w.rows = 2;
  w.cols = 3;
  w.data = q.data();
  w.scales = s.data();
  EXPECT_EQ(weight_at(w, 0, 0), -12.6968994140625f);  // -127 * 1638 / 16384
  EXPECT_EQ(weight_at(w, 0, 1), 0.0f);
  EXPECT_EQ(weight_at(w, 0, 2), 0.0999755859375f);
  EXPECT_EQ(weight_at(w, 1, 0), 127 * 0x1p-24f);
  EXPECT_EQ(weight_at(w, 1, 2), -3 * 0x1p-24f);
}

TEST(WeightAt, Bf16AndF32) {
  std::vector<uint16_t> b = {0x3F80, 0x4049, 0x8000, 0xC2F7, 0x0001};
  WeightView w;
  w.type = WeightType::BF16;
  w.rows = 1;
  w.cols = 5;
  w.data = b.data();
  EXPECT_EQ(weight_at(w, 0, 0), 1.0f);
  EXPECT_EQ(weight_at(w, 0, 1), 3.140625f);
  EXPECT_TRUE(std::signbit(weight_at(w, 0, 2)) && weight_at(w, 0, 2) == 0.0f);
  EXPECT_EQ(weight_at(w, 0, 3), -123.5f);
  EXPECT_EQ(weight_at(w, 0, 4), 0x1p-133f);
  std::vector<float> f = {1.5f, -2.25f};
  WeightView wf;
  wf.rows = 1;
  wf.cols = 2;
  wf.data = f.data();
  EXPECT_EQ(weight_at(wf, 0, 1), -2.25f);
}

TEST(WeightAt, ByteCounts) {
  WeightView w;
  w.rows = 4;
  w.cols = 64;
  w.type = WeightType::F32;
  EXPECT_EQ(weight_bytes(w), 1024u);
  w.type = WeightType::BF16;
  EXPECT_EQ(weight_bytes(w), 512u);
  w.type = WeightType::Int8Row;
  EXPECT_EQ(weight_bytes(w), 256u + 8u);
  w.type = WeightType::MXFP4;
  EXPECT_EQ(weight_bytes(w), 128u + 8u);
}

// The kernels' own decode, read back through one-hot products (y = w_c
// exactly: every other product is a signed zero), equals weight_at for every
// code and every scale byte 0..252 (253 and up overflow for code 7), on every
// path, batched (T = 32) and one row at a time.
TEST(MatmulDecode, Mxfp4EveryCodeEveryScaleOnEveryPath) {
  const size_t rows = 253, cols = 32;
  std::vector<uint8_t> packed(rows * 16), scales(rows);
  for (size_t r = 0; r < rows; ++r) {
    scales[r] = static_cast<uint8_t>(r);
    for (int j = 0; j < 16; ++j) packed[r * 16 + j] = static_cast<uint8_t>(((2 * j + 1 + r) % 16) << 4 | ((2 * j + r) % 16));
  }
  WeightView w = mxfp4_view(packed, scales, rows, cols);
  std::vector<float> x(cols * cols, 0.0f);
  for (size_t t = 0; t < cols; ++t) x[t * cols + t] = 1.0f;
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    std::vector<float> y(cols * rows);
    matmul(w, x.data(), cols, y.data());
    for (size_t t = 0; t < cols; ++t) {
      std::vector<float> y1(rows);
      matmul(w, x.data() + t * cols, 1, y1.data());
      for (size_t r = 0; r < rows; ++r) {
        float want = weight_at(w, r, t);
        ASSERT_EQ(y[t * rows + r], want) << isa_name(isa) << " scale " << r << " col " << t;
        ASSERT_EQ(y1[r], want) << isa_name(isa) << " T=1 scale " << r << " col " << t;
      }
    }
  }
}

namespace {

// What the OCP Microscaling Formats spec (v1.0) says a code and a scale
// byte are, written out here rather than read from the tables under test:
// e2m1 codes 0-7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and codes 8-15 their
// negatives (8 is -0); e8m0 byte s is 2^(s - 127), and 255 is NaN.
const double kSpecE2M1[16] = {0.0,  0.5,  1.0,  1.5,  2.0,  3.0,  4.0,  6.0,
                              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};

// code x 2^(s - 127) as fp32 arithmetic gives it: every such product is
// exact in double and in fp32 (at most two significant bits, and 2^-128 is
// an fp32 subnormal), except past FLT_MAX, where the multiply gives inf.
float spec_product(size_t code, size_t s) {
  const double exact = std::ldexp(kSpecE2M1[code], static_cast<int>(s) - 127);
  if (std::fabs(exact) > static_cast<double>(std::numeric_limits<float>::max()))
    return std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(kSpecE2M1[code]));
  return static_cast<float>(exact);
}

uint32_t spec_bits(float f) { return std::bit_cast<uint32_t>(f); }

}  // namespace

// The decode tables every path reads, against the spec's values: the e2m1
// codes, the e8m0 scales (byte 0 the subnormal 2^-127, 255 NaN), and each
// scale's e2m1 row that the decode loops load instead of multiplying (its
// overflow at scales 253 and 254 and its subnormals at scale 0 included).
TEST(MatmulDecode, DecodeTablesHoldTheSpecValues) {
  using kernels_detail::kE2M1ByScale;
  using kernels_detail::kE2M1Signed;
  using kernels_detail::kE8M0Scale;
  for (size_t c = 0; c < 16; ++c)
    EXPECT_EQ(spec_bits(kE2M1Signed[c]), spec_bits(static_cast<float>(kSpecE2M1[c]))) << "code " << c;
  for (size_t s = 0; s < 255; ++s)
    EXPECT_EQ(static_cast<double>(kE8M0Scale[s]), std::ldexp(1.0, static_cast<int>(s) - 127)) << "scale byte " << s;
  EXPECT_EQ(spec_bits(kE8M0Scale[0]), 0x00400000u);  // 2^-127: an fp32 subnormal
  EXPECT_EQ(kE8M0Scale[127], 1.0f);
  EXPECT_EQ(kE8M0Scale[254], 0x1p127f);
  EXPECT_TRUE(std::isnan(kE8M0Scale[255]));
  for (size_t s = 0; s < 256; ++s)
    for (size_t c = 0; c < 16; ++c) {
      const float entry = kE2M1ByScale[16 * s + c];
      if (s == 255) {
        EXPECT_TRUE(std::isnan(entry)) << "code " << c;
        continue;
      }
      ASSERT_EQ(spec_bits(entry), spec_bits(spec_product(c, s))) << "scale byte " << s << " code " << c;
    }
  // A few entries spelled out: 6 x 2^1, -0.5 x 2^-127 (subnormal), 4 x 2^127
  // and -6 x 2^126 (both past FLT_MAX), 3 x 2^126 (the largest finite).
  EXPECT_EQ(kE2M1ByScale[16 * 128 + 7], 12.0f);
  EXPECT_EQ(spec_bits(kE2M1ByScale[16 * 0 + 9]), 0x80200000u);
  EXPECT_EQ(kE2M1ByScale[16 * 254 + 6], std::numeric_limits<float>::infinity());
  EXPECT_EQ(kE2M1ByScale[16 * 253 + 15], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(kE2M1ByScale[16 * 253 + 5], 0x1.8p127f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kE2M1ByScale) % 64, 0u);
}

TEST(MatmulDecode, Int8AndBf16OnEveryPath) {
  Rng rng(7);
  for (WeightType type : {WeightType::BF16, WeightType::Int8Row}) {
    const size_t rows = 9, cols = 45;  // a partial last group
    OwnedWeight ow = random_weight(rng, type, rows, cols);
    WeightView w = ow.view();
    std::vector<float> x(cols * cols, 0.0f);
    for (size_t t = 0; t < cols; ++t) x[t * cols + t] = 1.0f;
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> y(cols * rows);
      matmul(w, x.data(), cols, y.data());
      for (size_t t = 0; t < cols; ++t)
        for (size_t r = 0; r < rows; ++r)
          ASSERT_EQ(y[t * rows + r], weight_at(w, r, t)) << type_name(type) << " " << isa_name(isa) << " r" << r << " c" << t;
    }
  }
}
