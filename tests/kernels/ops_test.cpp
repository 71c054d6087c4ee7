// Vector ops: accuracy against float64 (k3-model.md §12 tolerances), the
// documented operation orders, and bit identity across ISA paths.
#include "kernels/ops.h"
#include "kernels/portable_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_test_util.h"

using namespace deltafin;
using namespace deltafin::test;

namespace {

double sigmoid64(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::vector<float> l2_normalized(Rng& rng, size_t n) {
  std::vector<float> v = random_floats(rng, n);
  double s = 0;
  for (float f : v) s += double(f) * f;
  for (float& f : v) f = static_cast<float>(f / std::sqrt(s));
  return v;
}

}  // namespace

TEST(Ops, DotAndSumMatchFloat64) {
  Rng rng(10);
  for (size_t n : {1, 7, 31, 32, 33, 100, 1000, 4097}) {
    std::vector<float> dots, sums;
    std::vector<double> dots64, sums64;
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> a = random_floats(rng, n), b = random_floats(rng, n);
      double d = 0, s = 0;
      for (size_t i = 0; i < n; ++i) d += double(a[i]) * b[i], s += a[i];
      dots64.push_back(d);
      sums64.push_back(s);
      dots.push_back(dot(a.data(), b.data(), n));
      sums.push_back(sum(a.data(), n));
    }
    EXPECT_LE(rel_l2(dots, dots64), 1e-5) << n;
    EXPECT_LE(rel_l2(sums, sums64), 1e-5) << n;
  }
}

TEST(Ops, DotAndSumUseTheLaneTree) {
  const float big = 16777216.0f;  // 2^24
  // a0 = (big), a1 = (1), a2 = (1), a3 = (-big): b0 = big, b1 = 1 - big, so 1;
  // left to right gives 0 and (a0+a3)+(a1+a2) gives 2.
  std::vector<float> a(40, 0.0f), ones(40, 1.0f);
  a[0] = big, a[4] = 1.0f, a[8] = 1.0f, a[12] = -big;
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    EXPECT_EQ(dot(a.data(), ones.data(), 40), 1.0f) << isa_name(isa);
    EXPECT_EQ(sum(a.data(), 40), 1.0f) << isa_name(isa);
    EXPECT_EQ(sum(a.data(), 13), 1.0f) << isa_name(isa);  // a partial group only
  }
}

TEST(Ops, RmsnormMatchesFloat64) {
  Rng rng(11);
  for (size_t n : {5, 64, 129, 7168}) {
    std::vector<float> x = random_floats(rng, n, 3.0), w = random_floats(rng, n);
    double ss = 0;
    for (float f : x) ss += double(f) * f;
    double r = 1.0 / std::sqrt(ss / n + 1e-5);
    std::vector<double> ref_w(n), ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = x[i] * r, ref_w[i] = w[i] * ref[i];
    std::vector<float> out(n), out_nw(n);
    rmsnorm(x.data(), w.data(), n, 1e-5f, out.data());
    rmsnorm(x.data(), nullptr, n, 1e-5f, out_nw.data());
    EXPECT_LE(rel_l2(out, ref_w), 1e-5) << n;
    EXPECT_LE(rel_l2(out_nw, ref), 1e-5) << n;
    // In place gives the same bits; the weight multiplies after normalising.
    std::vector<float> inplace = x;
    rmsnorm(inplace.data(), w.data(), n, 1e-5f, inplace.data());
    EXPECT_TRUE(same_bits(inplace, out));
    float rr = 1.0f / std::sqrt(dot(x.data(), x.data(), n) / static_cast<float>(n) + 1e-5f);
    EXPECT_TRUE(same_bits(out[n - 1], w[n - 1] * (x[n - 1] * rr)));
  }
}

TEST(Ops, SoftmaxMatchesFloat64) {
  Rng rng(12);
  for (size_t n : {1, 9, 33, 500}) {
    std::vector<float> x = random_floats(rng, n, 4.0);
    x[0] += 1000.0f;  // no overflow: the max is subtracted first
    double m = x[0];
    for (float f : x) m = std::max(m, double(f));
    std::vector<double> ref(n);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += (ref[i] = std::exp(double(x[i]) - m));
    for (double& v : ref) v /= s;
    softmax(x.data(), n);
    EXPECT_LE(rel_l2(x, ref), 1e-5) << n;
  }
  std::vector<float> one = {3.0f};
  softmax(one.data(), 1);
  EXPECT_EQ(one[0], 1.0f);
}

// SiTU split over a pool: the same bits as the serial loop, at sizes below,
// at and above the per-task chunk (and odd ones).
TEST(Ops, SituOnAPoolEqualsTheSerialLoop) {
  Rng rng(21);
  ThreadPool pool2(2), pool3(3);
  for (size_t n : {size_t{1}, size_t{2047}, size_t{2048}, size_t{3072}, size_t{10000}}) {
    std::vector<float> g = random_floats(rng, n, 6.0), u = random_floats(rng, n, 30.0);
    std::vector<float> serial(n), two(n), three(n);
    situ(g.data(), u.data(), n, 4.0f, 25.0f, serial.data());
    situ(g.data(), u.data(), n, 4.0f, 25.0f, two.data(), &pool2);
    situ(g.data(), u.data(), n, 4.0f, 25.0f, three.data(), &pool3);
    EXPECT_TRUE(same_bits(serial, two)) << n;
    EXPECT_TRUE(same_bits(serial, three)) << n;
  }
}

// SiTU's SIMD forms (AVX-512: every double step of portable tanhf/expf per
// lane) against the scalar loop, bit for bit, on inputs that reach every
// branch: NaN, infinities, zeros, subnormals, the tanh series (|x| < 2^-12)
// and saturation (> 9.5) bounds, expf's overflow (89) and underflow (-104)
// bounds and their neighbours, a wide random spread; lengths 1..17 cover
// the masked tails.
TEST(Ops, SituIsTheSameOnEveryPath) {
  Rng rng(22);
  std::vector<float> edge = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                             -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                             -1e-40f, 1e-30f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  for (float bound : {0x1p-12f * 4.0f, 9.5f * 4.0f, 0x1p-12f * 25.0f, 9.5f * 25.0f, 89.0f, -89.0f, 104.0f, -104.0f,
                      0x1p-12f, 9.5f})
    for (float v : {bound, std::nextafter(bound, 0.0f), std::nextafter(bound, 2.0f * bound)}) edge.push_back(v), edge.push_back(-v);
  std::vector<float> g = edge, u = edge;
  std::reverse(u.begin(), u.end());
  for (int i = 0; i < 20000; ++i) {
    const double scale = std::ldexp(1.0, static_cast<int>(rng.next() % 40) - 20);
    g.push_back(static_cast<float>(rng.normal() * scale));
    u.push_back(static_cast<float>(rng.normal() * scale * 5));
  }
  for (auto [beta, beta_lin] : {std::pair{4.0f, 25.0f}, std::pair{1.0f, 1.0f}, std::pair{0.5f, 100.0f}}) {
    std::vector<float> want(g.size());
    {
      IsaScope scope(Isa::Scalar);
      situ(g.data(), u.data(), g.size(), beta, beta_lin, want.data());
    }
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> got(g.size());
      situ(g.data(), u.data(), g.size(), beta, beta_lin, got.data());
      // A NaN result's sign and payload depend on which operand the compiler
      // put first in a multiply (x86 returns the first NaN): NaN-ness is
      // what is defined, and what is checked.
      auto same = [](float a, float b) { return std::isnan(a) ? std::isnan(b) : same_bits(a, b); };
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_TRUE(same(got[i], want[i]))
            << isa_name(isa) << " g " << g[i] << " u " << u[i] << ": " << got[i] << " vs " << want[i];
      for (size_t n = 1; n <= 17; ++n) {  // tails: out beyond n untouched
        std::vector<float> part(20, 7.0f);
        situ(g.data() + 3, u.data() + 3, n, beta, beta_lin, part.data());
        for (size_t i = 0; i < n; ++i) ASSERT_TRUE(same(part[i], want[3 + i])) << isa_name(isa) << " n " << n;
        for (size_t i = n; i < 20; ++i) ASSERT_EQ(part[i], 7.0f) << isa_name(isa) << " n " << n;
      }
    }
  }
}

TEST(Ops, ElementwiseMatchFloat64) {
  Rng rng(13);
  EXPECT_EQ(sigmoid(0.0f), 0.5f);
  EXPECT_EQ(silu(0.0f), 0.0f);
  for (int i = 0; i < 2000; ++i) {
    float x = static_cast<float>(rng.normal() * (i % 2 ? 3.0 : 20.0));
    if (x == 0.0f) continue;
    EXPECT_LE(rel_err(sigmoid(x), sigmoid64(x)), 1e-6) << x;
    EXPECT_LE(rel_err(silu(x), x * sigmoid64(x)), 1e-6) << x;
  }
  // SiTU, k3-model.md §7.6, with beta = 4 and beta_lin = 25.
  const size_t n = 3000;
  std::vector<float> g = random_floats(rng, n, 6.0), u = random_floats(rng, n, 30.0), out(n);
  situ(g.data(), u.data(), n, 4.0f, 25.0f, out.data());
  for (size_t i = 0; i < n; ++i) {
    double ref = (std::tanh(g[i] / 4.0) * 4.0 * sigmoid64(g[i])) * (std::tanh(u[i] / 25.0) * 25.0);
    if (ref != 0.0) {
      EXPECT_LE(rel_err(out[i], ref), 1e-6) << g[i] << " " << u[i];
    }
    // The documented fp32 steps, each rounded (division by 25, not * 0.04).
    float t1 = portable_tanhf(g[i] / 4.0f), t2 = t1 * 4.0f, t3 = t2 * sigmoid(g[i]);
    float t4 = portable_tanhf(u[i] / 25.0f), t5 = t4 * 25.0f;
    EXPECT_TRUE(same_bits(out[i], t3 * t5)) << i;
  }
}

TEST(Ops, L2NormalizeMatchesFloat64AndFloor) {
  Rng rng(14);
  std::vector<float> x = random_floats(rng, 128);
  double s = 0;
  for (float f : x) s += double(f) * f;
  std::vector<double> ref(128);
  for (size_t i = 0; i < 128; ++i) ref[i] = x[i] / std::sqrt(s);
  l2_normalize(x.data(), 128, 1e-12f);
  EXPECT_LE(rel_l2(x, ref), 1e-5);
  std::vector<float> zero(16, 0.0f);
  l2_normalize(zero.data(), 16, 1e-12f);
  for (float f : zero) EXPECT_EQ(f, 0.0f);
  std::vector<float> tiny(4, 1e-20f);  // norm 2e-20 < floor: divided by the floor
  l2_normalize(tiny.data(), 4, 1e-12f);
  EXPECT_EQ(tiny[0], 1e-20f / 1e-12f);
}

TEST(Ops, ShortConvStepMatchesFloat64AndKeepsTheWindow) {
  Rng rng(15);
  const size_t C = 37, K = 4, steps = 6;
  std::vector<float> w = random_floats(rng, C * K), state(C * K, 0.0f);
  std::vector<std::vector<float>> inputs;
  for (size_t s = 0; s < steps; ++s) {
    inputs.push_back(random_floats(rng, C));
    std::vector<float> out(C);
    short_conv_step(inputs[s].data(), w.data(), state.data(), C, K, out.data());
    std::vector<double> ref(C);
    for (size_t c = 0; c < C; ++c) {
      double acc = 0;
      float win[4];
      for (size_t j = 0; j < K; ++j) {
        // Tap j multiplies x_{s - (K-1) + j}; positions before 0 are zero.
        long pos = long(s) - long(K - 1) + long(j);
        win[j] = pos < 0 ? 0.0f : inputs[pos][c];
        acc += double(w[c * K + j]) * win[j];
        EXPECT_EQ(state[c * K + j], win[j]) << "state after step " << s;
      }
      ref[c] = acc * sigmoid64(acc);
      // The documented fp32 order: products rounded, summed left to right.
      float f = ((w[c * K] * win[0] + w[c * K + 1] * win[1]) + w[c * K + 2] * win[2]) + w[c * K + 3] * win[3];
      EXPECT_TRUE(same_bits(out[c], silu(f))) << c;
    }
    EXPECT_LE(rel_l2(out, ref), 1e-5) << "step " << s;
  }
}

namespace {

struct KdaCase {
  size_t K, V;
  std::vector<float> S, q, k, v, g;
  float beta;
};

KdaCase random_kda(Rng& rng, size_t K, size_t V) {
  KdaCase c{K, V, random_floats(rng, K * V, 0.3), l2_normalized(rng, K), l2_normalized(rng, K),
            random_floats(rng, V), {}, static_cast<float>(sigmoid64(rng.normal()))};
  for (size_t i = 0; i < K; ++i) c.g.push_back(static_cast<float>(-5.0 * sigmoid64(rng.normal())));
  return c;
}

}  // namespace

TEST(Ops, KdaStepMatchesFloat64) {
  Rng rng(16);
  for (auto [K, V] : {std::pair<size_t, size_t>{128, 128}, {20, 37}, {7, 100}}) {
    KdaCase c = random_kda(rng, K, V);
    std::vector<double> S(c.S.begin(), c.S.end()), o_ref(V, 0.0), delta(V);
    for (size_t r = 0; r < K; ++r)
      for (size_t j = 0; j < V; ++j) S[r * V + j] *= std::exp(double(c.g[r]));
    for (size_t j = 0; j < V; ++j) {
      double p = 0;
      for (size_t r = 0; r < K; ++r) p += c.k[r] * S[r * V + j];
      delta[j] = c.v[j] - p;
    }
    for (size_t r = 0; r < K; ++r)
      for (size_t j = 0; j < V; ++j) S[r * V + j] += double(c.beta) * c.k[r] * delta[j];
    for (size_t j = 0; j < V; ++j)
      for (size_t r = 0; r < K; ++r) o_ref[j] += c.q[r] * S[r * V + j];
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> state = c.S, o(V);
      kda_step(state.data(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta, K, V, o.data());
      EXPECT_LE(rel_l2(o, o_ref), 1e-5) << K << "x" << V << " " << isa_name(isa);
      EXPECT_LE(rel_l2(state, S), 1e-5) << K << "x" << V << " " << isa_name(isa);
    }
  }
}

TEST(Ops, AttentionMatchesFloat64) {
  Rng rng(17);
  const size_t dk = 192, dv = 128, ks = 200, vs = 130;
  for (size_t n : {1, 2, 37}) {
    std::vector<float> q = random_floats(rng, dk), keys = random_floats(rng, n * ks), values = random_floats(rng, n * vs);
    const float scale = 0.072168782f;
    std::vector<double> s(n), ref(dv, 0.0);
    double m = -1e300, z = 0;
    for (size_t j = 0; j < n; ++j) {
      double d = 0;
      for (size_t i = 0; i < dk; ++i) d += double(q[i]) * keys[j * ks + i];
      s[j] = d * scale;
      m = std::max(m, s[j]);
    }
    for (size_t j = 0; j < n; ++j) z += (s[j] = std::exp(s[j] - m));
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < dv; ++i) ref[i] += s[j] / z * values[j * vs + i];
    for (Isa isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> scratch(n), out(dv, 99.0f);
      attention(q.data(), keys.data(), ks, values.data(), vs, n, dk, dv, scale, scratch.data(), out.data());
      EXPECT_LE(rel_l2(out, ref), 1e-5) << n << " " << isa_name(isa);
      if (n == 1) {  // p = 1 exactly: the output is the value row
        EXPECT_EQ(scratch[0], 1.0f);
        for (size_t i = 0; i < dv; ++i) EXPECT_EQ(out[i], values[i]);
      }
    }
  }
}

// Every op on every path gives the scalar path's bits.
TEST(Ops, PathsAgreeBitForBit) {
  using Outputs = std::vector<std::vector<float>>;
  auto all_ops = []() {
    Rng r(99);  // the same inputs for every path
    Outputs out;
    for (size_t n : {3, 32, 45, 77, 1000}) {
      std::vector<float> a = random_floats(r, n), b = random_floats(r, n), w = random_floats(r, n);
      out.push_back({dot(a.data(), b.data(), n), sum(a.data(), n)});
      std::vector<float> y(n);
      rmsnorm(a.data(), w.data(), n, 1e-5f, y.data());
      out.push_back(y);
      rmsnorm(a.data(), nullptr, n, 1e-5f, y.data());
      out.push_back(y);
      std::vector<float> sm = a;
      softmax(sm.data(), n);
      out.push_back(sm);
      std::vector<float> l2 = a;
      l2_normalize(l2.data(), n, 1e-12f);
      out.push_back(l2);
      std::vector<float> acc = b;
      axpy(0.37f, a.data(), acc.data(), n);
      out.push_back(acc);
    }
    for (auto [K, V] : {std::pair<size_t, size_t>{128, 128}, {20, 37}, {9, 71}}) {
      KdaCase c = random_kda(r, K, V);
      std::vector<float> o(V);
      for (int step = 0; step < 3; ++step) {
        kda_step(c.S.data(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta, K, V, o.data());
        out.push_back(o);
      }
      out.push_back(c.S);
    }
    for (size_t n : {1, 5, 40}) {
      const size_t dk = 192, dv = 131;
      std::vector<float> q = random_floats(r, dk), keys = random_floats(r, n * dk), values = random_floats(r, n * dv);
      std::vector<float> scratch(n), o(dv);
      attention(q.data(), keys.data(), dk, values.data(), dv, n, dk, dv, 0.072168782f, scratch.data(), o.data());
      out.push_back(o);
      out.push_back(scratch);
    }
    return out;
  };
  Outputs scalar;
  {
    IsaScope scope(Isa::Scalar);
    scalar = all_ops();
  }
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    Outputs got = all_ops();
    ASSERT_EQ(got.size(), scalar.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], scalar[i])) << isa_name(isa) << " output " << i;
  }
}
