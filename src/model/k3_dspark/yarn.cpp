#include "model/k3_dspark/yarn.h"

#include <algorithm>
#include <cmath>

#include "util/numeric.h"

namespace deltafin {

double yarn_mscale(double factor, double m) {
  if (factor <= 1) return 1.0;
  return 0.1 * m * std::log(factor) + 1.0;
}

double yarn_correction_dim(double beta, int64_t dim, double theta, int64_t original_max_positions) {
  const double two_pi = 6.283185307179586;
  return static_cast<double>(dim) * std::log(static_cast<double>(original_max_positions) / (beta * two_pi)) /
         (2.0 * std::log(theta));
}

namespace {

// A rounded correction dimension as an integer. An extreme but legal config
// (a base just above 1, a tiny beta) puts it past the int64 range, where the
// conversion is undefined; the clamp changes no value inside it.
int64_t clamped_int64(double x) {
  constexpr double kBound = 0x1p62;
  return static_cast<int64_t>(std::clamp(x, -kBound, kBound));
}

}  // namespace

DSparkYarn make_dspark_yarn(const DSparkConfig& c) {
  DSparkYarn y;
  y.dim = c.qk_rope_head_dim;
  const double theta = c.rope.rope_theta, factor = c.rope.factor;
  const int64_t l0 = c.rope.original_max_position_embeddings;
  // Pairs rotating faster than beta_fast turns over L0 keep their frequency
  // (extrapolate), slower than beta_slow turns are interpolated by `factor`,
  // and a linear ramp blends the pairs in between.
  y.low = std::max<int64_t>(clamped_int64(std::floor(yarn_correction_dim(c.rope.beta_fast, y.dim, theta, l0))), 0);
  y.high = static_cast<double>(
      std::min<int64_t>(clamped_int64(std::ceil(yarn_correction_dim(c.rope.beta_slow, y.dim, theta, l0))), y.dim - 1));
  if (y.high == static_cast<double>(y.low)) y.high += 0.001;  // avoid a zero-width ramp
  const int64_t pairs = y.dim / 2;
  y.inv_freq.resize(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    double base = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(y.dim));
    double interp = base / factor;
    double ramp = (static_cast<double>(i) - static_cast<double>(y.low)) / (y.high - static_cast<double>(y.low));
    ramp = std::clamp(ramp, 0.0, 1.0);
    y.inv_freq[static_cast<size_t>(i)] = static_cast<float>(interp * ramp + base * (1.0 - ramp));
  }
  // Longer contexts flatten attention; YaRN compensates by sharpening the
  // softmax with mscale² (the rotation itself stays unscaled when mscale ==
  // mscale_all_dim, as in K3's DSpark).
  const double m_all = yarn_mscale(factor, c.rope.mscale_all_dim);
  y.attention_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.qk_head_dim())) * m_all * m_all);
  y.cos_sin_scale = static_cast<float>(yarn_mscale(factor, c.rope.mscale) / m_all);
  return y;
}

void yarn_rotate(const DSparkYarn& y, int64_t position, float* x) {
  const float pos = static_cast<float>(position);
  const size_t pairs = y.inv_freq.size();
  for (size_t i = 0; i < pairs; ++i) {
    const float phase = pos * y.inv_freq[i];
    const float c = std::cos(phase) * y.cos_sin_scale;
    const float s = std::sin(phase) * y.cos_sin_scale;
    const float e = x[2 * i], o = x[2 * i + 1];
    const float ec = e * c, os = o * s, oc = o * c, es = e * s;
    x[2 * i] = bf16_to_f32(f32_to_bf16(ec - os));
    x[2 * i + 1] = bf16_to_f32(f32_to_bf16(oc + es));
  }
}

}  // namespace deltafin
