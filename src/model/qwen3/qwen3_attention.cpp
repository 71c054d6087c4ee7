#include "model/qwen3/qwen3_attention.h"

#include <algorithm>
#include <cmath>
#include <numbers>


namespace deltafin {

namespace {

// The pair index whose wavelength spans max_positions / (beta) positions.
double yarn_correction_dim(double beta, double dim, double theta, double max_positions) {
  return dim * std::log(max_positions / (beta * 2 * std::numbers::pi)) / (2 * std::log(theta));
}

}  // namespace

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

void Qwen3RopeRows::fill(Backend& be, const Qwen3Rope& rope, int64_t start, size_t T) {
  qwen3_rope_tables(rope, start, T, cos_host, sin_host);
  const size_t half = rope.inv_freq.size();
  cos = be.act(T, half);
  sin = be.act(T, half);
  be.write(cos, 0, cos_host);
  be.write(sin, 0, sin_host);
}

bool qwen3_attention_block(Backend& be, const Qwen3Config& c, const Qwen3AttentionWeights& L, int64_t l,
                           KvSession& session, int64_t start, const Act& cos, const Act& sin, Act& x,
                           const std::function<bool()>& stop) {
  const size_t T = x.rows(), d = c.hidden_size, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim();
  const float eps = static_cast<float>(c.rms_norm_eps);
  Act h = be.act(T, d), q = be.act(T, qd), k = be.act(T, kvd), v = be.act(T, kvd);
  be.rmsnorm(x, L.input_norm, eps, h);
  be.matmul(L.q.view(), h, q);
  be.matmul(L.k.view(), h, k);
  be.matmul(L.v.view(), h, v);
  // QK-norm per head over head_dim, before RoPE (Qwen3's one change from Qwen2).
  be.rmsnorm_heads(q, L.q_norm, hd, eps);
  be.rope_half(q, hd, cos, sin);
  be.rmsnorm_heads(k, L.k_norm, hd, eps);
  be.rope_half(k, hd, cos, sin);
  be.kv_store(k, v, session.layer(l), start);
  // Causal attention: position start + t sees cache rows 0 .. start + t, all
  // written above; query head hh reads KV head hh / G (grouped-query).
  const GqaShape shape{static_cast<size_t>(c.num_attention_heads), kvd / hd, hd, start,
                       static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))};
  Act attn = be.act(T, qd);
  if (!be.attention_gqa(q, session.layer(l), shape, attn, stop)) return false;
  be.matmul(L.o.view(), attn, h);  // h is free again: it takes o_proj's output
  be.add(x, h);
  return true;
}

}  // namespace deltafin
