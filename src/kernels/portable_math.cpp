// See portable_math.h. e^y = 2^(k/32) e^r: k = round(32 y / ln2), a table of
// the 32 values 2^(j/32) (correctly rounded doubles) and a degree-5 Taylor
// polynomial for e^r, |r| <= ln2/64 (the first term left out is below 3e-15
// relative); tanh(a) = (e^2a - 1) / (e^2a + 1) from one such e^2a. The
// float results are within about 1e-11 (relative) of the exact value before
// their one rounding, so they are the correctly rounded floats but where the
// exact value is that close to a rounding boundary. Every step is an IEEE-754
// operation with one defined result (the rounding to an integer below adds
// and subtracts 1.5 * 2^52, which rounds to nearest in the default mode that
// deltafin never changes), so every machine computes the same bits.
#include "kernels/portable_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace deltafin {

namespace {

constexpr double kExp2Table[32] = {
    0x1.0000000000000p+0,  // 2^(0/32)
    0x1.059b0d3158574p+0,  // 2^(1/32)
    0x1.0b5586cf9890fp+0,  // 2^(2/32)
    0x1.11301d0125b51p+0,  // 2^(3/32)
    0x1.172b83c7d517bp+0,  // 2^(4/32)
    0x1.1d4873168b9aap+0,  // 2^(5/32)
    0x1.2387a6e756238p+0,  // 2^(6/32)
    0x1.29e9df51fdee1p+0,  // 2^(7/32)
    0x1.306fe0a31b715p+0,  // 2^(8/32)
    0x1.371a7373aa9cbp+0,  // 2^(9/32)
    0x1.3dea64c123422p+0,  // 2^(10/32)
    0x1.44e086061892dp+0,  // 2^(11/32)
    0x1.4bfdad5362a27p+0,  // 2^(12/32)
    0x1.5342b569d4f82p+0,  // 2^(13/32)
    0x1.5ab07dd485429p+0,  // 2^(14/32)
    0x1.6247eb03a5585p+0,  // 2^(15/32)
    0x1.6a09e667f3bcdp+0,  // 2^(16/32)
    0x1.71f75e8ec5f74p+0,  // 2^(17/32)
    0x1.7a11473eb0187p+0,  // 2^(18/32)
    0x1.82589994cce13p+0,  // 2^(19/32)
    0x1.8ace5422aa0dbp+0,  // 2^(20/32)
    0x1.93737b0cdc5e5p+0,  // 2^(21/32)
    0x1.9c49182a3f090p+0,  // 2^(22/32)
    0x1.a5503b23e255dp+0,  // 2^(23/32)
    0x1.ae89f995ad3adp+0,  // 2^(24/32)
    0x1.b7f76f2fb5e47p+0,  // 2^(25/32)
    0x1.c199bdd85529cp+0,  // 2^(26/32)
    0x1.cb720dcef9069p+0,  // 2^(27/32)
    0x1.d5818dcfba487p+0,  // 2^(28/32)
    0x1.dfc97337b9b5fp+0,  // 2^(29/32)
    0x1.ea4afa2a490dap+0,  // 2^(30/32)
    0x1.f50765b6e4540p+0,  // 2^(31/32)
};

// 2^m for the m a float result needs (|m| < 1000), built from its bits.
double pow2(int64_t m) {
  const uint64_t bits = static_cast<uint64_t>(m + 1023) << 52;
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

constexpr double kInvStep = 0x1.71547652b82fep+5;  // 32 / ln2
// ln2 / 32 in two parts: the high part has 21 significant bits, so k times
// it is exact for the |k| < 2^13 that occur here.
constexpr double kStepHi = 6.93147180369123816490e-01 / 32, kStepLo = 1.90821492927058770002e-10 / 32;
constexpr double kExpConstants[6] = {kInvStep, kStepHi, kStepLo, 1.0 / 6, 1.0 / 24, 1.0 / 120};

// e^y for -150 < y < 150.
double exp_reduced(double y) {
  constexpr double kRound = 0x1.8p52;
  const double kd = (y * kInvStep + kRound) - kRound;  // y * 32 / ln2 rounded to an integer
  const double r = (y - kd * kStepHi) - kd * kStepLo;
  const double p = 1.0 + r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120)))));
  const int64_t k = static_cast<int64_t>(kd);
  const int64_t j = k & 31;
  return kExp2Table[j] * p * pow2((k - j) / 32);
}

}  // namespace

const double* const kernels_detail::kPortableExp2Table = kExp2Table;
const double* const kernels_detail::kPortableExpConstants = kExpConstants;

float portable_expf(float x) {
  if (std::isnan(x)) return x;
  const double y = x;
  if (y > 89.0) return HUGE_VALF;  // e^88.73 already overflows a float
  if (y < -104.0) return 0.0f;     // below half the least subnormal
  return static_cast<float>(exp_reduced(y));
}

float portable_tanhf(float x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(static_cast<double>(x));
  double t;
  if (a < 0x1p-12) {
    t = a - a * a * a / 3.0;  // the series' next term, 2a^5/15, is below 2^-62 a
  } else if (a > 9.5) {
    t = 1.0;  // tanh(a) > 1 - 2^-26 rounds to 1.0f
  } else {
    // e^2a - 1 >= 2a: its absolute error (about 3e-16 e^2a) stays below
    // 1e-11 of it for a >= 2^-12.
    const double e = exp_reduced(2.0 * a);
    t = (e - 1.0) / (e + 1.0);
  }
  const float r = static_cast<float>(t);
  return std::signbit(x) ? -r : r;
}

}  // namespace deltafin
