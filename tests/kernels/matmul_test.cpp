// matmul: accuracy against float64, hand-computed rows, the canonical lane
// order, and bit identity across batch size, thread count and ISA path.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/kernel_table.h"
#include "util/error.h"
#include "util/thread_pool.h"

using namespace deltafin;
using namespace deltafin::test;

namespace {

std::vector<float> run(const WeightView& w, const std::vector<float>& x, size_t T, ThreadPool* pool = nullptr) {
  std::vector<float> y(T * w.rows, 12345.0f);
  matmul(w, x.data(), T, y.data(), pool);
  return y;
}

// The T products of one x row each, laid out as a T-row product's output.
std::vector<float> one_row_at_a_time(const WeightView& w, const std::vector<float>& x, size_t T) {
  std::vector<float> y(T * w.rows);
  for (size_t t = 0; t < T; ++t) {
    std::vector<float> xt(x.begin() + t * w.cols, x.begin() + (t + 1) * w.cols);
    std::vector<float> yt = run(w, xt, 1);
    std::copy(yt.begin(), yt.end(), y.begin() + t * w.rows);
  }
  return y;
}

WeightView f32_row(const std::vector<float>& w) {
  WeightView v;
  v.type = WeightType::F32;
  v.rows = 1;
  v.cols = w.size();
  v.data = w.data();
  return v;
}

}  // namespace

TEST(Matmul, MatchesFloat64ForEveryTypeAndPath) {
  Rng rng(1);
  struct Shape {
    size_t rows, cols, T;
  };
  // Includes a partial last group, several column blocks and both row tilings.
  for (Shape s : {Shape{37, 300, 3}, Shape{16, 1100, 1}, Shape{9, 1100, 6}, Shape{5, 64, 1}}) {
    for (WeightType type : kAllTypes) {
      size_t cols = cols_for(type, s.cols);
      OwnedWeight ow = random_weight(rng, type, s.rows, cols);
      std::vector<float> x = random_floats(rng, s.T * cols);
      std::vector<double> ref = reference_matmul(ow.view(), x, s.T);
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<float> y = run(ow.view(), x, s.T);
        EXPECT_LE(rel_l2(y, ref), 1e-5) << type_name(type) << " " << isa_name(isa) << " " << s.rows << "x" << cols
                                         << " T=" << s.T;
      }
    }
  }
}

TEST(Matmul, SubnormalMxfp4WeightsMatchFloat64) {
  Rng rng(2);
  OwnedWeight ow = random_weight(rng, WeightType::MXFP4, 6, 96, 0, 3);  // weights ~2^-127
  std::vector<float> x = random_floats(rng, 2 * 96, 1e30);
  std::vector<double> ref = reference_matmul(ow.view(), x, 2);
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    EXPECT_LE(rel_l2(run(ow.view(), x, 2), ref), 1e-5) << isa_name(isa);
  }
}

TEST(Matmul, HandComputedMxfp4Row) {
  // Byte j: low nibble code j % 8 (column 2j, +m), high nibble 8 + j % 8
  // (column 2j+1, -m). With x[c] = c + 1 each pair gives m * ((2j+1) - (2j+2))
  // = -m, so y = -2 * (0 + .5 + 1 + 1.5 + 2 + 3 + 4 + 6) = -36, times 2^(128-127).
  std::vector<uint8_t> packed(16), scales = {128};
  for (int j = 0; j < 16; ++j) packed[j] = static_cast<uint8_t>((8 + j % 8) << 4 | (j % 8));
  WeightView w;
  w.type = WeightType::MXFP4;
  w.rows = 1;
  w.cols = 32;
  w.data = packed.data();
  w.scales = scales.data();
  std::vector<float> x(32);
  for (int c = 0; c < 32; ++c) x[c] = static_cast<float>(c + 1);
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    EXPECT_EQ(run(w, x, 1)[0], -72.0f) << isa_name(isa);
  }
}

TEST(Matmul, HandComputedInt8RowAppliesScaleAfterDot) {
  // q[c] = c - 16 for c = 0..31 sums to -16; f16 scale 0x3800 = 0.5 -> -8.
  // Row 1: q = 1 everywhere with scale 0x3C00 = 1 and x = 0.25 -> 8.
  std::vector<int8_t> q(64);
  for (int c = 0; c < 32; ++c) q[c] = static_cast<int8_t>(c - 16), q[32 + c] = 1;
  std::vector<uint16_t> s = {0x3800, 0x3C00};
  WeightView w;
  w.type = WeightType::Int8Row;
  w.rows = 2;
  w.cols = 32;
  w.data = q.data();
  w.scales = s.data();
  std::vector<float> ones(32, 1.0f), quarter(32, 0.25f);
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    EXPECT_EQ(run(w, ones, 1)[0], -8.0f) << isa_name(isa);
    EXPECT_EQ(run(w, quarter, 1)[1], 8.0f) << isa_name(isa);
  }
}

// Inputs where another association gives another float: the result pins the
// lane assignment, the order inside a lane and the tree.
TEST(Matmul, CanonicalLaneTreeOrder) {
  const float big = 16777216.0f;  // 2^24: big + 1 rounds back to big (ties to even)
  struct Case {
    std::vector<std::pair<size_t, float>> x;  // nonzero columns (w = 1 everywhere)
    size_t cols;
    float expected;
    const char* why;
  };
  const Case cases[] = {
      // Lane 0 absorbs both ones in order: big, +1 -> big, +1 -> big. (Summing
      // the ones first would give big + 2.)
      {{{0, big}, {32, 1.0f}, {64, 1.0f}}, 96, big, "one lane, columns in order"},
      // a0 = (big..), a1 = (1..), a2 = (1..), a3 = (-big..): b0 = big, b1 =
      // 1 - big, c0 = 1. Lane-sequential gives 0, (a0+a3)+(a1+a2) gives 2.
      {{{0, big}, {4, 1.0f}, {8, 1.0f}, {12, -big}}, 32, 1.0f, "b = pairs of 4-lane vectors"},
      // b0 = a0+a1 = big, b2 = a4+a5 = 1 - big, c0 = big, c1 = 1 - big, v = 1.
      // (a0+a4)+(a1+a5) would give 2.
      {{{0, big}, {4, 1.0f}, {16, -big}, {20, 1.0f}}, 32, 1.0f, "c = (b0+b1), (b2+b3)"},
      // v = (big, 1, 1, -big): (v0+v1)+(v2+v3) = big + (1 - big) = 1; left to
      // right gives 0.
      {{{0, big}, {1, 1.0f}, {2, 1.0f}, {3, -big}}, 32, 1.0f, "final (v0+v1)+(v2+v3)"},
      // The partial last group goes to its lanes the same way: column 33 is
      // lane 1, column 36 lane 4 (after column 4): a0 = (big, 1, 0, 0), a1 =
      // (1 - big, 0, 0, 0), b0 = (1, 1, 0, 0), result 2. Summing the tail
      // separately would give 1, left to right 0.
      {{{0, big}, {4, 1.0f}, {33, 1.0f}, {36, -big}}, 37, 2.0f, "tail columns keep their lanes"},
  };
  for (const Case& c : cases) {
    std::vector<float> x(c.cols, 0.0f), w(c.cols, 1.0f);
    for (auto [i, v] : c.x) x[i] = v;
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      EXPECT_EQ(run(f32_row(w), x, 1)[0], c.expected) << c.why << " " << isa_name(isa);
      // The same row batched with another: same value.
      std::vector<float> x2(x);
      x2.insert(x2.end(), x.begin(), x.end());
      std::vector<float> y2 = run(f32_row(w), x2, 2);
      EXPECT_EQ(y2[0], c.expected) << c.why << " " << isa_name(isa);
      EXPECT_EQ(y2[1], c.expected) << c.why << " " << isa_name(isa);
    }
  }
}

// Batched == T single-row calls, bit for bit, on random shapes, for every
// type and path; and every path equals the scalar one.
TEST(Matmul, BatchedEqualsSingleRowsAndPathsAgree) {
  Rng rng(3);
  for (WeightType type : kAllTypes) {
    for (int trial = 0; trial < 10; ++trial) {
      size_t rows = 1 + rng.below(23);
      size_t cols = whole_groups_only(type) ? 32 * (1 + rng.below(20)) : 1 + rng.below(700);
      size_t T = trial == 0 ? 70 : 1 + rng.below(70);
      // Scale bytes from 0: subnormal weights go through the same paths.
      OwnedWeight ow = random_weight(rng, type, rows, cols, 0, 140);
      std::vector<float> x = random_floats(rng, T * cols);
      std::vector<float> scalar_y;
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<float> batched = run(ow.view(), x, T);
        std::vector<float> single(T * rows);
        for (size_t t = 0; t < T; ++t) {
          std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
          std::vector<float> yt = run(ow.view(), xt, 1);
          for (size_t r = 0; r < rows; ++r) single[t * rows + r] = yt[r];
        }
        EXPECT_TRUE(same_bits(batched, single))
            << type_name(type) << " " << isa_name(isa) << " " << rows << "x" << cols << " T=" << T;
        if (isa == Isa::Scalar) scalar_y = batched;
        EXPECT_TRUE(same_bits(batched, scalar_y))
            << type_name(type) << " " << isa_name(isa) << " vs scalar, " << rows << "x" << cols << " T=" << T;
      }
    }
  }
}

// Every T from 1 to 20 at odd row counts: each path's small-T and tile
// remainders (AVX-512 MXFP4 decodes in registers up to kFusedMaxT rows in runs
// of four; its batched tile takes x rows six at a time) equal T single-row
// products and the scalar path, bit for bit.
TEST(Matmul, EverySmallBatchEqualsSingleRows) {
  Rng rng(6);
  for (WeightType type : kAllTypes) {
    const size_t rows = 7, cols = cols_for(type, 300);
    OwnedWeight ow = random_weight(rng, type, rows, cols, 0, 140);
    for (size_t T = 1; T <= 20; ++T) {
      std::vector<float> x = random_floats(rng, T * cols);
      std::vector<float> scalar_y;
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<float> single = one_row_at_a_time(ow.view(), x, T);
        std::vector<float> batched = run(ow.view(), x, T);
        EXPECT_TRUE(same_bits(batched, single)) << type_name(type) << " " << isa_name(isa) << " T=" << T;
        if (isa == Isa::Scalar) scalar_y = batched;
        EXPECT_TRUE(same_bits(batched, scalar_y)) << type_name(type) << " " << isa_name(isa) << " vs scalar, T=" << T;
      }
    }
  }
}

// Calls longer than kMaxRowsPerCall rows are split into blocks (bounded
// scratch): the blocks' seams change no bit, on every path and thread count.
TEST(Matmul, CallsLongerThanOneBlockEqualSingleRows) {
  Rng rng(5);
  ThreadPool pool2(2);
  const size_t T = 2 * kernels_detail::kMaxRowsPerCall + 37;
  for (WeightType type : kAllTypes) {
    const size_t rows = 9, cols = cols_for(type, 70);
    OwnedWeight ow = random_weight(rng, type, rows, cols);
    std::vector<float> x = random_floats(rng, T * cols);
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> single = one_row_at_a_time(ow.view(), x, T);
      EXPECT_TRUE(same_bits(run(ow.view(), x, T), single)) << type_name(type) << " " << isa_name(isa);
      EXPECT_TRUE(same_bits(run(ow.view(), x, T, &pool2), single)) << type_name(type) << " " << isa_name(isa) << " 2 threads";
    }
  }
}

TEST(Matmul, ThreadCountDoesNotChangeBits) {
  Rng rng(4);
  ThreadPool pool2(2), pool3(3);
  for (WeightType type : kAllTypes) {
    size_t cols = cols_for(type, 333);
    OwnedWeight ow = random_weight(rng, type, 41, cols);
    for (size_t T : {size_t{1}, size_t{7}}) {
      std::vector<float> x = random_floats(rng, T * cols);
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<float> one = run(ow.view(), x, T);
        EXPECT_TRUE(same_bits(one, run(ow.view(), x, T, &pool2))) << type_name(type) << " " << isa_name(isa) << " T=" << T;
        EXPECT_TRUE(same_bits(one, run(ow.view(), x, T, &pool3))) << type_name(type) << " " << isa_name(isa) << " T=" << T;
      }
    }
  }
}

// matmul_pair = two matmul calls, bit for bit, on every path and thread
// count: row counts that are not whole row tiles (so a thread's range can
// straddle the two weights), T from 1 to past one call's block, and the
// inputs that need padding.
TEST(Matmul, PairEqualsTwoProducts) {
  Rng rng(8);
  ThreadPool pool2(2), pool3(3);
  for (WeightType type : kAllTypes) {
    const size_t cols = cols_for(type, 333);
    OwnedWeight a = random_weight(rng, type, 13, cols), b = random_weight(rng, type, 6, cols);
    for (size_t T : {size_t{1}, size_t{3}, size_t{9}, kernels_detail::kMaxRowsPerCall + 5}) {
      std::vector<float> x = random_floats(rng, T * cols);
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        const std::vector<float> ya = run(a.view(), x, T), yb = run(b.view(), x, T);
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
          std::vector<float> pa(T * 13), pb(T * 6);
          matmul_pair(a.view(), b.view(), x.data(), T, pa.data(), pb.data(), pool);
          const int threads = pool == nullptr ? 1 : pool->size();
          EXPECT_TRUE(same_bits(pa, ya)) << type_name(type) << " " << isa_name(isa) << " T=" << T << " threads " << threads;
          EXPECT_TRUE(same_bits(pb, yb)) << type_name(type) << " " << isa_name(isa) << " T=" << T << " threads " << threads;
        }
      }
    }
  }
  OwnedWeight a = random_weight(rng, WeightType::BF16, 4, 64), b = random_weight(rng, WeightType::BF16, 4, 96);
  std::vector<float> x(96), ya(4), yb(4);
  EXPECT_THROW(matmul_pair(a.view(), b.view(), x.data(), 1, ya.data(), yb.data(), &pool2), Error);
}

// The gated pair: both products' bits as two matmul() calls, and `then` called
// on disjoint row ranges that cover every row once, each after both products
// of its rows are written (checked by reading them inside the callback).
TEST(Matmul, GatedPairRunsThenOnEveryRowOnceAfterItsProducts) {
  Rng rng(9);
  ThreadPool pool2(2), pool3(3);
  for (WeightType type : kAllTypes) {
    const size_t rows = 37, cols = cols_for(type, 200);
    OwnedWeight a = random_weight(rng, type, rows, cols), b = random_weight(rng, type, rows, cols);
    for (size_t T : {size_t{1}, size_t{4}, kernels_detail::kMaxRowsPerCall + 3}) {
      std::vector<float> x = random_floats(rng, T * cols);
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        const std::vector<float> ya = run(a.view(), x, T), yb = run(b.view(), x, T);
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
          const int threads = pool == nullptr ? 1 : pool->size();
          std::vector<float> pa(T * rows), pb(T * rows), sum(T * rows, -1.0f);
          std::vector<std::atomic<int>> calls(rows);
          matmul_pair(a.view(), b.view(), x.data(), T, pa.data(), pb.data(), pool, [&](size_t rb, size_t re) {
            ASSERT_LE(rb, re);
            ASSERT_LE(re, rows);
            for (size_t r = rb; r < re; ++r) {
              calls[r].fetch_add(1);
              for (size_t t = 0; t < T; ++t) sum[t * rows + r] = pa[t * rows + r] + pb[t * rows + r];
            }
          });
          const std::string where = std::string(type_name(type)) + " " + isa_name(isa) + " T=" + std::to_string(T) +
                                    " threads " + std::to_string(threads);
          EXPECT_TRUE(same_bits(pa, ya)) << where;
          EXPECT_TRUE(same_bits(pb, yb)) << where;
          for (size_t r = 0; r < rows; ++r) ASSERT_EQ(calls[r].load(), 1) << where << " row " << r;
          for (size_t i = 0; i < T * rows; ++i) ASSERT_EQ(sum[i], ya[i] + yb[i]) << where << " element " << i;
        }
      }
    }
  }
  OwnedWeight a = random_weight(rng, WeightType::BF16, 4, 64), b = random_weight(rng, WeightType::BF16, 5, 64);
  std::vector<float> x(64), ya(4), yb(5);
  EXPECT_THROW(matmul_pair(a.view(), b.view(), x.data(), 1, ya.data(), yb.data(), &pool2, [](size_t, size_t) {}),
               Error);
}

TEST(Matmul, RejectsBadArguments) {
  std::vector<uint8_t> packed(48), scales(3);
  WeightView w;
  w.type = WeightType::MXFP4;
  w.rows = 2;
  w.cols = 48;
  w.data = packed.data();
  w.scales = scales.data();
  std::vector<float> x(48), y(2);
  try {
    matmul(w, x.data(), 1, y.data());
    FAIL() << "cols = 48 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
  w.cols = 32;
  w.scales = nullptr;
  EXPECT_THROW(matmul(w, x.data(), 1, y.data()), Error);
  w.type = WeightType::Int8Row;
  EXPECT_THROW(matmul(w, x.data(), 1, y.data()), Error);
  w.type = WeightType::F32;
  w.data = nullptr;
  EXPECT_THROW(matmul(w, x.data(), 1, y.data()), Error);
}

TEST(Matmul, EmptyShapes) {
  std::vector<float> wdata(8, 1.0f), x(8, 1.0f), y(4, 7.0f);
  WeightView w;
  w.type = WeightType::F32;
  w.rows = 2;
  w.cols = 0;
  w.data = wdata.data();
  matmul(w, x.data(), 2, y.data());
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}));
  y.assign(4, 7.0f);
  w.cols = 4;
  matmul(w, x.data(), 0, y.data());  // T = 0 writes nothing
  EXPECT_EQ(y[0], 7.0f);
}

// ---------------------------------------------------------------------------
// The released types: FP8Block (DeepSeek V3, Kimi K2) and Int4Group32 (Kimi
// K2-Thinking's experts).

namespace {

// FP8Block and Int4Group32 decoded here from their definitions, in float64,
// without weight_at or the kernel tables: e4m3fn's fields (bias 7, exponent
// 0 subnormal), the block scale found by its index formula; the int4 word's
// nibble (little-endian I32), u - 8, the bf16 scale from its bits.
double e4m3_by_definition(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (code & 0x80) ? -v : v;
}

double weight_by_definition(const OwnedWeight& w, size_t r, size_t c) {
  if (w.type == WeightType::FP8Block) {
    const size_t blocks_per_row = (w.cols + 127) / 128;
    float scale;
    std::memcpy(&scale, w.scales.data() + 4 * ((r / 128) * blocks_per_row + c / 128), 4);
    // At most 4 + 24 significant bits: exact in float64, so this is the
    // definition's product before its one fp32 rounding.
    return e4m3_by_definition(w.data[r * w.cols + c]) * static_cast<double>(scale);
  }
  const uint8_t* word = w.data.data() + 4 * ((r * w.cols + c) / 8);
  const uint32_t bits = uint32_t{word[0]} | uint32_t{word[1]} << 8 | uint32_t{word[2]} << 16 | uint32_t{word[3]} << 24;
  const int q = static_cast<int>((bits >> (4 * (c % 8))) & 15) - 8;
  uint16_t scale_bits;
  std::memcpy(&scale_bits, w.scales.data() + 2 * ((r * w.cols + c) / 32), 2);
  float scale;
  const uint32_t widened = uint32_t{scale_bits} << 16;
  std::memcpy(&scale, &widened, 4);
  return q * static_cast<double>(scale);
}

// y = W x in float64 from the definition, with each output's error bound.
// The kernel's sum is the canonical one over fp32 weights: lane fmas (one
// rounding each, the product exact) then the five-level lane tree, so it is
// within gamma(D) * sum |w32 x| of sum w32 x, D = ceil(cols / 32) + 5
// (Higham, ch. 3-4; u = 2^-24, gamma(D) = D u / (1 - D u)). Int4Group32's
// w32 is the definition's weight exactly. FP8Block's is it rounded once,
// w32 = w (1 + e), |e| <= u (normal results: the scales here keep every
// weight normal), which adds u * sum |w x|; gamma(D) (1 + u) + u <=
// gamma(D + 1). So |y - ref| <= gamma(D + 1) * sum |w x| for both.
struct DefinitionRef {
  std::vector<double> value, bound;
};

DefinitionRef reference_by_definition(const OwnedWeight& w, const std::vector<float>& x, size_t T) {
  const double u = std::ldexp(1.0, -24), depth = static_cast<double>((w.cols + 31) / 32 + 5 + 1);
  const double gamma = depth * u / (1 - depth * u);
  DefinitionRef ref;
  for (size_t t = 0; t < T; ++t)
    for (size_t r = 0; r < w.rows; ++r) {
      double acc = 0, mag = 0;
      for (size_t c = 0; c < w.cols; ++c) {
        const double p = weight_by_definition(w, r, c) * x[t * w.cols + c];
        acc += p;
        mag += std::fabs(p);
      }
      ref.value.push_back(acc);
      ref.bound.push_back(gamma * mag);
    }
  return ref;
}

}  // namespace

// Every path at T = 1, 2, 3, 7, 33, 130, on shapes with the released types'
// edges: FP8Block over two block rows (130 rows, the second block 2 rows) and
// 200 columns (a partial 128-column block and a partial 32-column group);
// Int4Group32 at 96 and 224 columns (3 and 7 groups: no whole 128-block).
// Each output has the scalar path's bits, the bits of T one-row products and
// those of 2 and 3 threads, and is within the bound of the float64 product
// decoded from the definition.
TEST(Matmul, ReleasedTypesAgreeEverywhereAndMatchTheDefinition) {
  Rng rng(11);
  ThreadPool pool2(2), pool3(3);
  struct Case {
    WeightType type;
    size_t rows, cols;
  };
  const Case cases[] = {{WeightType::FP8Block, 130, 200},
                        {WeightType::FP8Block, 5, 128},
                        {WeightType::Int4Group32, 37, 96},
                        {WeightType::Int4Group32, 6, 224}};
  for (const Case& k : cases) {
    const OwnedWeight ow = random_weight(rng, k.type, k.rows, k.cols);
    for (size_t T : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{33}, size_t{130}}) {
      const std::vector<float> x = random_floats(rng, T * k.cols);
      const std::string what = std::string(type_name(k.type)) + " [" + std::to_string(k.rows) + ", " +
                               std::to_string(k.cols) + "] T=" + std::to_string(T);
      std::vector<float> scalar_y;
      {
        IsaScope scope(Isa::Scalar);
        scalar_y = run(ow.view(), x, T);
      }
      const DefinitionRef ref = reference_by_definition(ow, x, T);
      for (size_t i = 0; i < scalar_y.size(); ++i)
        ASSERT_LE(std::fabs(scalar_y[i] - ref.value[i]), ref.bound[i]) << what << " output " << i;
      for (Isa isa : supported_isas()) {
        IsaScope scope(isa);
        EXPECT_TRUE(same_bits(run(ow.view(), x, T), scalar_y)) << what << " " << isa_name(isa) << " vs scalar";
        EXPECT_TRUE(same_bits(one_row_at_a_time(ow.view(), x, T), scalar_y)) << what << " " << isa_name(isa) << " rows alone";
        if (T == 1 || T == 7 || T == 130) {
          EXPECT_TRUE(same_bits(run(ow.view(), x, T, &pool2), scalar_y)) << what << " " << isa_name(isa) << " 2 threads";
          EXPECT_TRUE(same_bits(run(ow.view(), x, T, &pool3), scalar_y)) << what << " " << isa_name(isa) << " 3 threads";
        }
      }
    }
  }
}

// The matmul argument checks for the released types: Int4Group32 takes whole
// 32-column groups (FP8Block any width), and both need their scales.
TEST(Matmul, ReleasedTypesRejectBadArguments) {
  std::vector<uint8_t> data(2 * 48), scales(64);
  std::vector<float> x(48), y(2);
  WeightView w{WeightType::Int4Group32, 2, 48, data.data(), scales.data()};
  try {
    matmul(w, x.data(), 1, y.data());
    FAIL() << "int4-group32 with cols = 48 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int4-group32 weight [2, 48]: cols must be a multiple of 32"), std::string::npos)
        << e.what();
  }
  w.type = WeightType::FP8Block;
  EXPECT_NO_THROW(matmul(w, x.data(), 1, y.data()));  // FP8Block: 48 columns is one partial block
  for (WeightType type : {WeightType::FP8Block, WeightType::Int4Group32}) {
    WeightView unscaled{type, 2, 32, data.data(), nullptr};
    try {
      matmul(unscaled, x.data(), 1, y.data());
      FAIL() << type_name(type) << " without scales accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("has no scales"), std::string::npos) << e.what();
    }
  }
}
