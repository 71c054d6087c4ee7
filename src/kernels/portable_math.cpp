// See portable_math.h. e^y by Cody-Waite reduction and a Taylor polynomial;
// tanh from expm1 (a Taylor series near 0, where e^y - 1 would cancel).
#include "kernels/portable_math.h"

#include <cmath>

namespace deltafin {

namespace {

// 1/k! for k = 0..18.
constexpr double kInvFact[19] = {1.0,
                                 1.0,
                                 1.0 / 2,
                                 1.0 / 6,
                                 1.0 / 24,
                                 1.0 / 120,
                                 1.0 / 720,
                                 1.0 / 5040,
                                 1.0 / 40320,
                                 1.0 / 362880,
                                 1.0 / 3628800,
                                 1.0 / 39916800,
                                 1.0 / 479001600,
                                 1.0 / 6227020800.0,
                                 1.0 / 87178291200.0,
                                 1.0 / 1307674368000.0,
                                 1.0 / 20922789888000.0,
                                 1.0 / 355687428096000.0,
                                 1.0 / 6402373705728000.0};

// e^y for |y| <= 745: y = k ln2 + r with |r| <= ln2 / 2, e^r by 15 Taylor
// terms (the first left out is below 2e-18 relative), times 2^k exactly.
// ln2_hi has 32 trailing zero bits, so k * ln2_hi is exact for |k| < 2^20.
// nearbyint rounds to nearest in the default mode, which deltafin never changes.
double exp_reduced(double y) {
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  const double k = std::nearbyint(y * 1.44269504088896338700e+00);
  const double r = (y - k * ln2_hi) - k * ln2_lo;
  double p = kInvFact[14];
  for (int i = 13; i >= 0; --i) p = p * r + kInvFact[i];
  return std::ldexp(p, static_cast<int>(k));
}

// e^y - 1 for 0 <= y <= 20, relative error near 1e-16: below 0.5 the series
// itself (18 terms: the first left out is below 1e-22), above it e^y - 1,
// where e^y >= 1.6 leaves no cancellation to speak of.
double expm1_positive(double y) {
  if (y < 0.5) {
    double t = kInvFact[18];
    for (int k = 17; k >= 1; --k) t = t * y + kInvFact[k];
    return t * y;
  }
  return exp_reduced(y) - 1.0;
}

}  // namespace

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
    const double e = expm1_positive(2.0 * a);
    t = e / (e + 2.0);
  }
  const float r = static_cast<float>(t);
  return std::signbit(x) ? -r : r;
}

}  // namespace deltafin
