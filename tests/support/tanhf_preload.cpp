// A tanhf for LD_PRELOAD, used only by scripts/test-arm64.sh to compare K3
// logits across machines. glibc 2.36's tanhf (fdlibm's, built on expm1f,
// which differs too) gives different bits on x86-64 and AArch64 for about 1
// float in 770 in [1/16, 4) (by 1-3 ulp), and K3's SiTU calls it for every
// MoE element,
// so a K3 run's logits cannot match across the two machines while both use
// their own libm. With this tanhf on both sides, the comparison tests what
// deltafin controls: the kernels and the forward pass.
//
// It uses only +, -, *, /, nearbyint and ldexp in double (exact or correctly
// rounded everywhere; the build's -ffp-contract=off keeps them unfused), so it
// has the same bits on every IEEE-754 machine. tanh(a) = e / (e + 2) with
// e = expm1(2a) by Taylor series (2a < 0.5) or exp by Cody-Waite reduction
// (otherwise), rounded once to float: on 3 million inputs in [2^-31, 16) it
// matched tanhl rounded to float every time.
#include <cmath>

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

// expm1(y) for y in [2^-11, 19], relative error near 1e-16.
double expm1_positive(double y) {
  if (y < 0.5) {  // 18 Taylor terms: the first left out is below 1e-22
    double t = kInvFact[18];
    for (int k = 17; k >= 1; --k) t = t * y + kInvFact[k];
    return t * y;
  }
  // y = k ln2 + r with |r| <= ln2 / 2; ln2_hi has 32 trailing zero bits, so
  // k * ln2_hi is exact for the k that occur here.
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  const double k = std::nearbyint(y * 1.44269504088896338700e+00);
  const double r = (y - k * ln2_hi) - k * ln2_lo;
  double p = kInvFact[14];
  for (int i = 13; i >= 0; --i) p = p * r + kInvFact[i];
  return std::ldexp(p, static_cast<int>(k)) - 1.0;  // e^y >= 1.6: no cancellation to speak of
}

}  // namespace

extern "C" float tanhf(float x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(static_cast<double>(x));
  double t;
  if (a < 0x1p-12) {
    t = a - a * a * a / 3.0;
  } else if (a > 9.5) {  // tanh(a) > 1 - 2^-26: 1.0f
    t = 1.0;
  } else {
    const double e = expm1_positive(2.0 * a);
    t = e / (e + 2.0);
  }
  const float r = static_cast<float>(t);
  return x < 0 ? -r : r;
}
