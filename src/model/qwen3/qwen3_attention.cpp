#include "model/qwen3/qwen3_attention.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace deltafin {

namespace {

// Rotate-half RoPE on one head in place: pairs (i, i + half), as Hugging
// Face's rotate_half: out_lo = x_lo*cos - x_hi*sin, out_hi = x_hi*cos + x_lo*sin.
void rope(float* x, const float* cos_p, const float* sin_p, size_t half) {
  for (size_t i = 0; i < half; ++i) {
    const float lo = x[i], hi = x[i + half];
    x[i] = lo * cos_p[i] - hi * sin_p[i];
    x[i + half] = hi * cos_p[i] + lo * sin_p[i];
  }
}

// The pair index whose wavelength spans max_positions / (beta) positions.
double yarn_correction_dim(double beta, double dim, double theta, double max_positions) {
  return dim * std::log(max_positions / (beta * 2 * std::numbers::pi)) / (2 * std::log(theta));
}

}  // namespace

void qwen3_parallel(ThreadPool* pool, size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (pool)
    pool->parallel_for(n, fn);
  else if (n)
    fn(0, n);
}

Qwen3Rope make_qwen3_rope(const Qwen3Config& c) {
  const size_t half = static_cast<size_t>(c.head_dim / 2);
  const double dim = static_cast<double>(c.head_dim);
  Qwen3Rope r;
  r.inv_freq.resize(half);
  for (size_t i = 0; i < half; ++i) r.inv_freq[i] = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / dim);
  if (!c.yarn.enabled) return r;
  // YaRN (qwen3_config.h): pairs below `low` keep their frequency
  // (extrapolation), pairs above `high` are divided by the factor
  // (interpolation), a linear ramp between.
  const Qwen3Yarn& y = c.yarn;
  const double L0 = static_cast<double>(y.original_max_position_embeddings);
  double low = yarn_correction_dim(y.beta_fast, dim, c.rope_theta, L0);
  double high = yarn_correction_dim(y.beta_slow, dim, c.rope_theta, L0);
  if (y.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  for (size_t i = 0; i < half; ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double keep = 1.0 - ramp;  // the extrapolation share
    r.inv_freq[i] = r.inv_freq[i] / y.factor * (1.0 - keep) + r.inv_freq[i] * keep;
  }
  r.attention_factor = y.attention_factor;
  return r;
}

void qwen3_rope_tables(const Qwen3Rope& r, int64_t start, size_t T, std::vector<float>& cos_t,
                       std::vector<float>& sin_t) {
  const size_t half = r.inv_freq.size();
  cos_t.assign(T * half, 0.0f);
  sin_t.assign(T * half, 0.0f);
  for (size_t t = 0; t < T; ++t) {
    const double pos = static_cast<double>(start + static_cast<int64_t>(t));
    for (size_t i = 0; i < half; ++i) {
      cos_t[t * half + i] = static_cast<float>(std::cos(pos * r.inv_freq[i]) * r.attention_factor);
      sin_t[t * half + i] = static_cast<float>(std::sin(pos * r.inv_freq[i]) * r.attention_factor);
    }
  }
}

bool qwen3_attention_block(const Qwen3Config& c, const Qwen3AttentionWeights& L, int64_t l, Qwen3Session& session,
                           int64_t start, size_t T, const float* cos_t, const float* sin_t, float* x,
                           ThreadPool* pool, const std::function<bool()>& stop) {
  const size_t d = c.hidden_size, hd = c.head_dim, half = hd / 2, H = c.num_attention_heads, G = c.groups(),
               qd = c.q_dim(), kvd = c.kv_dim();
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> h(T * d), q(T * qd), k(T * kvd), v(T * kvd), attn(T * qd), delta(T * d);

  for (size_t t = 0; t < T; ++t) rmsnorm(x + t * d, L.input_norm.data(), d, eps, h.data() + t * d);
  matmul(L.q.view(), h.data(), T, q.data(), pool);
  matmul(L.k.view(), h.data(), T, k.data(), pool);
  matmul(L.v.view(), h.data(), T, v.data(), pool);
  for (size_t t = 0; t < T; ++t) {
    // QK-norm per head over head_dim, before RoPE (Qwen3's one change from Qwen2).
    for (size_t hh = 0; hh < H; ++hh) {
      float* qh = q.data() + t * qd + hh * hd;
      rmsnorm(qh, L.q_norm.data(), hd, eps, qh);
      rope(qh, cos_t + t * half, sin_t + t * half, half);
    }
    float* kc = session.keys(l, start + static_cast<int64_t>(t));
    float* vc = session.values(l, start + static_cast<int64_t>(t));
    for (size_t g = 0; g < kvd / hd; ++g) {
      float* kh = k.data() + t * kvd + g * hd;
      rmsnorm(kh, L.k_norm.data(), hd, eps, kh);
      rope(kh, cos_t + t * half, sin_t + t * half, half);
    }
    for (size_t i = 0; i < kvd; ++i) kc[i] = k[t * kvd + i], vc[i] = v[t * kvd + i];
  }
  // Causal attention: position start + t sees cache rows 0 .. start + t, all
  // written above; query head hh reads KV head hh / G (grouped-query).
  const float* keys = session.keys(l, 0);
  const float* values = session.values(l, 0);
  for (size_t t0 = 0; t0 < T; t0 += kAttentionStopRows) {
    const size_t t1 = std::min(T, t0 + kAttentionStopRows);
    qwen3_parallel(pool, (t1 - t0) * H, [&](size_t begin, size_t end) {
      std::vector<float> scratch(static_cast<size_t>(start) + t1);
      for (size_t item = begin; item < end; ++item) {
        const size_t t = t0 + item / H, hh = item % H, g = hh / G;
        attention(q.data() + t * qd + hh * hd, keys + g * hd, kvd, values + g * hd, kvd,
                  static_cast<size_t>(start) + t + 1, hd, hd, scale, scratch.data(), attn.data() + t * qd + hh * hd);
      }
    });
    if (stop && t1 < T && stop()) return false;
  }
  matmul(L.o.view(), attn.data(), T, delta.data(), pool);
  for (size_t i = 0; i < T * d; ++i) x[i] = x[i] + delta[i];
  return true;
}

}  // namespace deltafin
