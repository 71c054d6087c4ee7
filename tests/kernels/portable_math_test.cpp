// portable_expf / portable_tanhf against long-double references written
// separately (libm's expl/tanhl), hand-known values, and the special cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/portable_math.h"

using namespace deltafin;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Distance in units in the last place between two finite floats of one sign.
int64_t ulps(float a, float b) { return std::llabs(static_cast<int64_t>(bits(a)) - static_cast<int64_t>(bits(b))); }

// Every 2^shift-th float bit pattern of one sign between lo and hi.
template <typename Fn>
void sweep(float lo, float hi, int shift, Fn fn) {
  for (uint32_t u = bits(lo); u <= bits(hi); u += 1u << shift) {
    float x;
    std::memcpy(&x, &u, 4);
    fn(x);
  }
}

}  // namespace

TEST(PortableMath, HandKnownValues) {
  EXPECT_EQ(portable_expf(0.0f), 1.0f);
  EXPECT_EQ(portable_expf(-0.0f), 1.0f);
  EXPECT_EQ(portable_expf(1.0f), 2.71828182845904523536f);
  EXPECT_EQ(portable_expf(-1.0f), 0.36787944117144233f);
  EXPECT_EQ(portable_expf(std::log(2.0f)), 2.0f);  // logf(2) rounds to 0.693147182..., e^that = 2.0000000x
  EXPECT_EQ(portable_tanhf(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(portable_tanhf(-0.0f)));
  EXPECT_EQ(portable_tanhf(1.0f), 0.76159415595576488812f);
  EXPECT_EQ(portable_tanhf(0.5f), 0.46211715726000975850f);
  EXPECT_EQ(portable_tanhf(10.0f), 1.0f);
  EXPECT_EQ(portable_tanhf(1e-30f), 1e-30f);
}

TEST(PortableMath, SpecialCases) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(portable_expf(inf), inf);
  EXPECT_EQ(portable_expf(-inf), 0.0f);
  EXPECT_EQ(portable_expf(100.0f), inf);
  EXPECT_EQ(portable_expf(88.0f), static_cast<float>(std::exp(88.0L)));
  EXPECT_EQ(portable_expf(-120.0f), 0.0f);
  EXPECT_GT(portable_expf(-100.0f), 0.0f);  // a subnormal float, not flushed
  EXPECT_LT(portable_expf(-100.0f), std::numeric_limits<float>::min());
  EXPECT_TRUE(std::isnan(portable_expf(nan)));
  EXPECT_EQ(portable_tanhf(inf), 1.0f);
  EXPECT_EQ(portable_tanhf(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(portable_tanhf(nan)));
}

// Over every 256th float in the ranges the forward pass feeds them (and the
// edges), each result is the long-double reference rounded to float, or one
// ulp from it where the reference is within 1e-11 (relative) of halfway
// (portable_math.h's bound), which happens for a handful of inputs at most.
TEST(PortableMath, CorrectlyRoundedAgainstLongDouble) {
  int64_t checked = 0, near_halfway = 0;
  auto check = [&](float x, float got, long double ref) {
    const float want = static_cast<float>(ref);
    ++checked;
    if (bits(got) == bits(want)) return;
    // Allowed only at a near-tie: the exact value is within 1e-11 of the midpoint.
    const float other = got;
    const long double mid = (static_cast<long double>(want) + static_cast<long double>(other)) / 2;
    const bool tie = ulps(got, want) == 1 && std::fabs(ref - mid) <= 1e-11L * std::fabs(ref);
    near_halfway += tie;
    EXPECT_TRUE(tie) << "x = " << x << " got " << got << " want " << want;
  };
  for (float sign : {1.0f, -1.0f}) {
    sweep(1e-6f, 87.0f, 8, [&](float a) {
      const float x = sign * a;
      check(x, portable_expf(x), std::exp(static_cast<long double>(x)));
    });
    sweep(1e-6f, 12.0f, 8, [&](float a) {
      const float x = sign * a;
      check(x, portable_tanhf(x), std::tanh(static_cast<long double>(x)));
    });
  }
  sweep(87.0f, 88.7f, 4, [&](float x) { check(x, portable_expf(x), std::exp(static_cast<long double>(x))); });
  sweep(87.0f, 103.9f, 8, [&](float a) { check(-a, portable_expf(-a), std::exp(-static_cast<long double>(a))); });
  EXPECT_GT(checked, 2'000'000);
  EXPECT_LT(near_halfway, 10) << "of " << checked;
}
