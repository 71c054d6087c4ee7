// Exact weight decode (k3-model.md §4.2-4.3, §5.2) against hand-decoded values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/weights.h"
#include "util/error.h"

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

// ---------------------------------------------------------------------------
// FP8Block and Int4Group32 (DeepSeek V3 / Kimi K2 as released)

// e4m3fn codes decoded by hand (sign, exponent bias 7, 3 mantissa bits):
// 0x38 = 0.0111.000 = 2^0 = 1; 0x01 = the smallest subnormal, 1/8 x 2^-6 =
// 2^-9; 0x07 = 7 x 2^-9; 0x08 = the smallest normal 2^-6; 0x7E = 0.1111.110 =
// 1.75 x 2^8 = 448 (the largest); 0x78 = 2^8; 0xB8 = -1; 0x80 = -0; 0x7F and
// 0xFF NaN. Scales per 128 x 128 block: a [130, 200] matrix has 2 x 2.
TEST(WeightAt, Fp8BlockHandDecoded) {
  const size_t rows = 130, cols = 200;
  std::vector<uint8_t> codes(rows * cols, 0x38);
  const std::vector<float> scales = {1.0f, 0.5f, 4.0f, 0x1p-20f};  // blocks (0,0) (0,1) (1,0) (1,1)
  WeightView w{WeightType::FP8Block, rows, cols, codes.data(), scales.data()};
  const std::pair<uint8_t, float> hand[] = {{0x38, 1.0f},       {0x01, 0x1p-9f},  {0x07, 7 * 0x1p-9f}, {0x08, 0x1p-6f},
                                            {0x7E, 448.0f},     {0x78, 256.0f},   {0xB8, -1.0f},       {0xFE, -448.0f},
                                            {0x3F, 1.875f},     {0x00, 0.0f},     {0x44, 3.0f},        {0x81, -0x1p-9f}};
  for (size_t i = 0; i < std::size(hand); ++i) codes[i] = hand[i].first;
  for (size_t i = 0; i < std::size(hand); ++i)
    EXPECT_EQ(weight_at(w, 0, i), hand[i].second) << "code " << int(hand[i].first);
  codes[0] = 0x80;
  EXPECT_TRUE(std::signbit(weight_at(w, 0, 0)) && weight_at(w, 0, 0) == 0.0f);  // -0, not +0
  codes[0] = 0x7F, codes[1] = 0xFF;
  EXPECT_TRUE(std::isnan(weight_at(w, 0, 0)));
  EXPECT_TRUE(std::isnan(weight_at(w, 0, 1)));
  // The block of (r, c) is (r / 128, c / 128): code 1.0 everywhere else.
  EXPECT_EQ(weight_at(w, 0, 127), 1.0f);
  EXPECT_EQ(weight_at(w, 0, 128), 0.5f);
  EXPECT_EQ(weight_at(w, 127, 199), 0.5f);
  EXPECT_EQ(weight_at(w, 128, 0), 4.0f);
  EXPECT_EQ(weight_at(w, 129, 127), 4.0f);
  EXPECT_EQ(weight_at(w, 129, 199), 0x1p-20f);
  // One multiply, rounded to nearest even. Scale 1 + 2^-23 (one ulp of 1):
  // code 1.125 (0x39) gives 1.125 + 1.125 ulp -> 1.125 + 2^-23; 1.875 (0x3F)
  // 1.875 + 1.875 ulp -> 1.875 + 2^-22; 1.5 (0x3C) 1.5 + 1.5 ulp, a tie
  // between 1 and 2 ulps -> the even one, 1.5 + 2^-22. Scale 1 + 3 x 2^-23:
  // 1.5 + 4.5 ulp, a tie -> 4 ulps (even), 1.5 + 2^-21.
  std::vector<uint8_t> c2 = {0x39, 0x3F, 0x3C, 0x3C};
  std::vector<float> s2 = {f32_from_bits(0x3F800001u), f32_from_bits(0x3F800003u)};  // blocks (0,0), (0,1)
  WeightView w2{WeightType::FP8Block, 1, 129, c2.data(), s2.data()};
  c2.resize(129, 0x3C);
  w2.data = c2.data();
  EXPECT_EQ(weight_at(w2, 0, 0), 1.125f + 0x1p-23f);
  EXPECT_EQ(weight_at(w2, 0, 1), 1.875f + 0x1p-22f);
  EXPECT_EQ(weight_at(w2, 0, 2), 1.5f + 0x1p-22f);
  EXPECT_EQ(weight_at(w2, 0, 128), 1.5f + 0x1p-21f);
  // Subnormal results keep their bits: 0x01 x 2^-140 = 2^-149, the smallest
  // subnormal; 0x7E x 2^-140 = 448 x 2^-140 = 1.75 x 2^-132.
  std::vector<uint8_t> c3 = {0x01, 0x7E};
  std::vector<float> s3 = {0x1p-140f};
  WeightView w3{WeightType::FP8Block, 1, 2, c3.data(), s3.data()};
  EXPECT_EQ(f32_bits(weight_at(w3, 0, 0)), 0x00000001u);
  EXPECT_EQ(weight_at(w3, 0, 1), 0x1.cp-132f);
}

// Int4Group32: column 8j + k is nibble k of the row's word j (little-endian
// I32), value u - 8. Word 0x76543210 holds u = 0..7 in columns 0..7 (values
// -8..-1), 0xFEDCBA98 u = 8..15 (values 0..7). Scales per 32 columns, bf16:
// 0x3F80 = 1, 0x3E00 = 0.125, 0x0001 = 2^-133 (subnormal).
TEST(WeightAt, Int4Group32HandDecoded) {
  const size_t rows = 2, cols = 64;
  std::vector<uint32_t> words(rows * cols / 8, 0x88888888u);  // every value 0
  words[0] = 0x76543210u, words[1] = 0xFEDCBA98u;
  words[4] = 0x0000000Fu;           // row 0, column 32 (group 1): 7; 33..39: -8
  words[8 + 7] = 0x08888888u;       // row 1, column 63: u = 0, -8
  const std::vector<uint16_t> scales = {0x3F80, 0x3E00, 0x0001, 0x4000};  // row 0: 1, 0.125; row 1: 2^-133, 2
  WeightView w{WeightType::Int4Group32, rows, cols, words.data(), scales.data()};
  for (size_t c = 0; c < 16; ++c) EXPECT_EQ(weight_at(w, 0, c), static_cast<float>(static_cast<int>(c) - 8)) << c;
  EXPECT_EQ(weight_at(w, 0, 16), 0.0f);
  EXPECT_FALSE(std::signbit(weight_at(w, 0, 16)));  // u = 8 is +0
  EXPECT_EQ(weight_at(w, 0, 32), 7 * 0.125f);
  EXPECT_EQ(weight_at(w, 0, 33), -8 * 0.125f);
  EXPECT_EQ(weight_at(w, 0, 40), 0.0f);
  EXPECT_EQ(weight_at(w, 1, 0), 0.0f);
  EXPECT_EQ(weight_at(w, 1, 63), -16.0f);  // -8 x 2
  words[8] = 0x0000000Fu;  // row 1, column 0: 7 x 2^-133 (exact, subnormal)
  EXPECT_EQ(weight_at(w, 1, 0), 7 * 0x1p-133f);
  EXPECT_EQ(weight_at(w, 1, 1), -8 * 0x1p-133f);
}

TEST(WeightAt, ReleasedTypeByteCounts) {
  // FP8Block [130, 200]: 26,000 codes and 2 x 2 fp32 scales.
  WeightView w{WeightType::FP8Block, 130, 200, nullptr, nullptr};
  EXPECT_EQ(weight_bytes(w), 26000u + 16u);
  w.rows = 128, w.cols = 128;
  EXPECT_EQ(weight_bytes(w), 16384u + 4u);
  // DeepSeek V3's expert gate [2048, 7168]: 16 x 56 scale blocks.
  w.rows = 2048, w.cols = 7168;
  EXPECT_EQ(weight_bytes(w), 2048u * 7168u + 16u * 56u * 4u);
  // Int4Group32 [4, 64]: 128 bytes of words, 8 bf16 scales.
  WeightView q{WeightType::Int4Group32, 4, 64, nullptr, nullptr};
  EXPECT_EQ(weight_bytes(q), 128u + 16u);
  EXPECT_STREQ(weight_type_name(WeightType::FP8Block), "fp8-block");
  EXPECT_STREQ(weight_type_name(WeightType::Int4Group32), "int4-group32");
}

// The tables the paths read, against the e4m3fn definition written out here
// (value = (-1)^s x 2^(e-7) x (1 + m/8), e = 0: 2^-6 x m/8) and u - 8.
TEST(MatmulDecode, E4m3AndInt4TablesHoldTheSpecValues) {
  for (int code = 0; code < 256; ++code) {
    const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
    const float got = kernels_detail::kE4M3[code];
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(got)) << code;
      continue;
    }
    const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, e - 7);
    EXPECT_EQ(static_cast<double>(got), s ? -magnitude : magnitude) << "code " << code;
    EXPECT_EQ(std::signbit(got), s == 1) << "code " << code;
  }
  for (int u = 0; u < 16; ++u) EXPECT_EQ(kernels_detail::kInt4Signed[u], static_cast<float>(u - 8)) << u;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kernels_detail::kE4M3) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kernels_detail::kInt4Signed) % 64, 0u);
}

// The kernels' own FP8Block decode, read back through one-hot products (y =
// the weight exactly, -0 as +0), against e4m3(code) x scale rounded once to fp32
// (computed here in float64, where the product is exact, then converted), on
// every path, batched and one row at a time: all 254 finite codes, scales
// whose products round (full mantissas), scales either side of 2^8 and far
// above, and scales that make the products subnormal. A row holding a NaN code gives NaN for
// every input (NaN x 0), on every path.
TEST(MatmulDecode, Fp8EveryCodeEveryPath) {
  const size_t rows = 2, cols = 256;  // two 128-column scale blocks, one scale in both
  // 1, 1 + 2^-23, 2 - 2^-23, 0.00138 (a realistic weight_scale_inv), 2^8 - 2^-15
  // and 2^8 (either side of where the SIMD paths' scale x 2^120 overflows,
  // kernel_table.h), 2.4e6, and scales that make products subnormal.
  const uint32_t scale_bits[] = {0x3F800000u, 0x3F800001u, 0x3FFFFFFFu, 0x3AB4C6E7u, 0x437FFFFFu,
                                 0x43800000u, 0x4A1234ABu, 0x0B3A5C17u, 0x00000001u, 0x00654321u};
  // Row r holds the 256 codes rotated by 37r, so each code meets several
  // lanes; the NaN codes 0x7F and 0xFF become 0x00 and 0x80 (NaN rows below).
  std::vector<uint8_t> codes(rows * cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      uint8_t code = static_cast<uint8_t>((c + 37 * r) % 256);
      if ((code & 0x7F) == 0x7F) code &= 0x80;
      codes[r * cols + c] = code;
    }
  std::vector<float> x(cols * cols, 0.0f);
  for (size_t t = 0; t < cols; ++t) x[t * cols + t] = 1.0f;
  for (uint32_t sb : scale_bits) {
    const float scale = f32_from_bits(sb);
    const std::vector<float> scales = {scale, scale};
    WeightView w{WeightType::FP8Block, rows, cols, codes.data(), scales.data()};
    auto want = [&](size_t r, size_t c) {
      const uint8_t code = codes[r * cols + c];
      const int e = (code >> 3) & 15, m = code & 7;
      const double v = (e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10)) * ((code & 0x80) ? -1 : 1);
      return static_cast<float>(v * static_cast<double>(scale));  // exact in float64, then one rounding
    };
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> y(cols * rows);
      matmul(w, x.data(), cols, y.data());
      for (size_t t = 0; t < cols; ++t) {
        std::vector<float> y1(rows);
        matmul(w, x.data() + t * cols, 1, y1.data());
        for (size_t r = 0; r < rows; ++r) {
          const float expect = want(r, t);
          // Exact equality (a -0 weight sums to +0 with the +0 products).
          ASSERT_EQ(y[t * rows + r], expect)
              << isa_name(isa) << " scale 0x" << std::hex << sb << " code 0x" << int(codes[r * cols + t]);
          ASSERT_EQ(y1[r], expect)
              << isa_name(isa) << " T=1 scale 0x" << std::hex << sb << " code 0x" << int(codes[r * cols + t]);
        }
      }
    }
  }
  // Large scales (2^121, 1.5 x 2^120, 2^119: the SIMD paths take the table,
  // their scale x 2^120 overflowing) with the codes whose products stay
  // finite (0x00-0x6F, 0x80-0xEF: |v| <= 120): the same bits on every path as
  // the definition's product.
  for (uint32_t sb : {0x7C000000u, 0x7BC00000u, 0x7B000000u}) {
    const float scale = f32_from_bits(sb);
    std::vector<uint8_t> big(2 * 224);
    for (size_t i = 0; i < 224; ++i) big[i] = static_cast<uint8_t>(i < 112 ? i : 0x80 + (i - 112));
    for (size_t i = 0; i < 224; ++i) big[224 + i] = big[(i + 77) % 224];
    const std::vector<float> scales = {scale, scale};
    WeightView w{WeightType::FP8Block, 2, 224, big.data(), scales.data()};
    std::vector<float> xs(224 * 224, 0.0f);
    for (size_t t = 0; t < 224; ++t) xs[t * 224 + t] = 1.0f;
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> y(224 * 2);
      matmul(w, xs.data(), 224, y.data());
      for (size_t t = 0; t < 224; ++t)
        for (size_t r = 0; r < 2; ++r) {
          const uint8_t code = big[r * 224 + t];
          const int e = (code >> 3) & 15, m = code & 7;
          const double v = (e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10)) * ((code & 0x80) ? -1 : 1);
          ASSERT_EQ(y[t * 2 + r], static_cast<float>(v * static_cast<double>(scale)))
              << isa_name(isa) << " scale 0x" << std::hex << sb << " code 0x" << int(code);
        }
    }
  }
  // NaN codes: in a whole group, in the partial last group of a 40-column
  // row, and in the second 128-column block of a 256-column row (the SIMD
  // paths check whole blocks, then decode them without a test per group).
  for (size_t width : {size_t{64}, size_t{40}, size_t{256}}) {
    for (uint8_t nan_code : {uint8_t{0x7F}, uint8_t{0xFF}}) {
      std::vector<uint8_t> c(3 * width, 0x38);
      c[width + width - 3] = nan_code;  // row 1 only
      const std::vector<float> s((width + kFp8BlockSize - 1) / kFp8BlockSize, 1.0f);  // one per column block
      WeightView wn{WeightType::FP8Block, 3, width, c.data(), s.data()};
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        for (size_t T : {size_t{1}, size_t{5}}) {
          std::vector<float> xs(T * width, 0.0f), ys(T * 3);
          for (size_t t = 0; t < T; ++t) xs[t * width + t] = 1.0f;
          matmul(wn, xs.data(), T, ys.data());
          for (size_t t = 0; t < T; ++t) {
            EXPECT_EQ(ys[t * 3 + 0], 1.0f) << isa_name(isa) << " width " << width;
            EXPECT_TRUE(std::isnan(ys[t * 3 + 1])) << isa_name(isa) << " width " << width << " code " << int(nan_code);
            EXPECT_EQ(ys[t * 3 + 2], 1.0f) << isa_name(isa) << " width " << width;
          }
        }
      }
    }
  }
}

// The kernels' Int4Group32 decode through one-hot products: every nibble in
// every column position of its word, times bf16 scales of 1, a full
// mantissa, a large power and a subnormal, on every path, against (u - 8) x
// scale computed here.
TEST(MatmulDecode, Int4EveryNibbleEveryPath) {
  const size_t cols = 64;
  const uint16_t scale_bits[] = {0x3F80, 0x3FFF, 0x7DFF, 0x0001, 0x3C01};  // 1, 1.99.., 1.99.. x 2^124, 2^-133, ..
  const size_t rows = std::size(scale_bits);
  std::vector<uint8_t> packed(rows * cols / 2);
  std::vector<uint16_t> scales;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; c += 2) {
      const uint8_t lo = static_cast<uint8_t>((c + 3 * r) % 16), hi = static_cast<uint8_t>((c + 1 + 3 * r + c / 16) % 16);
      packed[r * cols / 2 + c / 2] = static_cast<uint8_t>(hi << 4 | lo);
    }
    scales.push_back(scale_bits[r]);
    scales.push_back(scale_bits[r]);
  }
  WeightView w{WeightType::Int4Group32, rows, cols, packed.data(), scales.data()};
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
        const uint8_t byte = packed[r * cols / 2 + t / 2];
        const int u = (t % 2 == 0) ? (byte & 15) : (byte >> 4);
        const float expect = static_cast<float>((u - 8) * static_cast<double>(f32_from_bits(uint32_t{scale_bits[r]} << 16)));
        ASSERT_EQ(y[t * rows + r], expect) << isa_name(isa) << " row " << r << " col " << t;
        ASSERT_EQ(y1[r], expect) << isa_name(isa) << " T=1 row " << r << " col " << t;
      }
    }
  }
}

// weight_rows: a slice's products are those rows of the whole product, bit
// for bit, for every type (FP8Block from row 128, across its second block
// row; the others from an odd row); an FP8Block slice from inside a block,
// and rows past the end, are refused by name.
TEST(WeightRows, SlicesGiveTheRowsOfTheWholeProduct) {
  Rng rng(12);
  for (WeightType type : kAllTypes) {
    const size_t rows = 300, cols = cols_for(type, 200);
    const size_t first = type == WeightType::FP8Block ? 128 : 37, n = 150;
    const OwnedWeight ow = random_weight(rng, type, rows, cols);
    const std::vector<float> x = random_floats(rng, 3 * cols);
    std::vector<float> whole(3 * rows), part(3 * n);
    matmul(ow.view(), x.data(), 3, whole.data());
    matmul(weight_rows(ow.view(), first, n), x.data(), 3, part.data());
    for (size_t t = 0; t < 3; ++t)
      for (size_t r = 0; r < n; ++r)
        ASSERT_EQ(f32_bits(part[t * n + r]), f32_bits(whole[t * rows + first + r])) << type_name(type) << " row " << r;
    EXPECT_THROW(weight_rows(ow.view(), 200, 101), Error) << type_name(type);
  }
  const OwnedWeight fp8 = random_weight(rng, WeightType::FP8Block, 300, 200);
  try {
    weight_rows(fp8.view(), 64, 64);
    FAIL() << "an fp8-block slice from row 64 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8-block matrix [300, 200] sliced from row 64: a slice must start at a "
                                         "multiple of 128 rows"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(weight_rows(fp8.view(), 256, 44));
  const OwnedWeight int4 = random_weight(rng, WeightType::Int4Group32, 300, 64);
  EXPECT_NO_THROW(weight_rows(int4.view(), 299, 1));
}
