#include "model/qwen3/qwen3_model.h"

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/error.h"
#include "util/numeric.h"

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

// Runs fn(begin, end) over [0, n), on the pool when there is one.
void parallel(ThreadPool* pool, size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (pool)
    pool->parallel_for(n, fn);
  else if (n)
    fn(0, n);
}

}  // namespace

Qwen3Model::Qwen3Model(const Qwen3Config& config, const Qwen3Weights& weights, ThreadPool* pool)
    : config_(config), weights_(weights), pool_(pool) {
  if (static_cast<int64_t>(weights.layers.size()) != config.num_hidden_layers ||
      weights.embed.rows != static_cast<size_t>(config.vocab_size) ||
      weights.embed.cols != static_cast<size_t>(config.hidden_size))
    fail("Qwen3 model: the weights were not loaded for this config");
}

std::vector<float> Qwen3Model::forward(Qwen3Session& session, std::span<const uint32_t> tokens, bool all_logits) {
  const Qwen3Config& c = config_;
  const Qwen3Weights& w = weights_;
  const size_t T = tokens.size();
  if (T == 0) fail("Qwen3 forward: no tokens");
  for (size_t t = 0; t < T; ++t)
    if (tokens[t] >= static_cast<uint64_t>(c.vocab_size))
      fail("Qwen3 forward: token id ", tokens[t], " at offset ", t, " is outside the vocabulary of ", c.vocab_size);
  if (session.layers() != c.num_hidden_layers || session.kv_dim() != c.kv_dim())
    fail("Qwen3 forward: the session was made for another model shape (", session.layers(), " layers, kv_dim ",
         session.kv_dim(), ")");
  const int64_t start = session.length();
  session.reserve(static_cast<int64_t>(T));  // refuses a pass beyond the capacity before anything changes

  const size_t d = c.hidden_size, hd = c.head_dim, half = hd / 2, H = c.num_attention_heads,
               G = c.groups(), qd = c.q_dim(), kvd = c.kv_dim(), I = c.intermediate_size, V = c.vocab_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));

  // cos/sin of each new position: angle = pos * theta^(-2i/hd) in double, then
  // rounded to fp32. They depend on the position only, never on T.
  std::vector<float> cos_t(T * half), sin_t(T * half);
  for (size_t t = 0; t < T; ++t) {
    const double pos = static_cast<double>(start + static_cast<int64_t>(t));
    for (size_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      cos_t[t * half + i] = static_cast<float>(std::cos(pos * inv_freq));
      sin_t[t * half + i] = static_cast<float>(std::sin(pos * inv_freq));
    }
  }

  std::vector<float> x(T * d), h(T * d), delta(T * d);
  for (size_t t = 0; t < T; ++t)
    for (size_t j = 0; j < d; ++j) x[t * d + j] = bf16_to_f32(w.embed.bf16_at(tokens[t], j));
  std::vector<float> q(T * qd), k(T * kvd), v(T * kvd), attn(T * qd), gate(T * I), up(T * I);

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Qwen3LayerWeights& L = w.layers[l];
    // Attention block.
    for (size_t t = 0; t < T; ++t) rmsnorm(x.data() + t * d, L.input_norm.data(), d, eps, h.data() + t * d);
    matmul(L.q.view(), h.data(), T, q.data(), pool_);
    matmul(L.k.view(), h.data(), T, k.data(), pool_);
    matmul(L.v.view(), h.data(), T, v.data(), pool_);
    for (size_t t = 0; t < T; ++t) {
      // QK-norm per head over head_dim, before RoPE (Qwen3's one change from Qwen2).
      for (size_t hh = 0; hh < H; ++hh) {
        float* qh = q.data() + t * qd + hh * hd;
        rmsnorm(qh, L.q_norm.data(), hd, eps, qh);
        rope(qh, cos_t.data() + t * half, sin_t.data() + t * half, half);
      }
      float* kc = session.keys(l, start + static_cast<int64_t>(t));
      float* vc = session.values(l, start + static_cast<int64_t>(t));
      for (size_t g = 0; g < kvd / hd; ++g) {
        float* kh = k.data() + t * kvd + g * hd;
        rmsnorm(kh, L.k_norm.data(), hd, eps, kh);
        rope(kh, cos_t.data() + t * half, sin_t.data() + t * half, half);
      }
      for (size_t i = 0; i < kvd; ++i) kc[i] = k[t * kvd + i], vc[i] = v[t * kvd + i];
    }
    // Causal attention: position start + t sees cache rows 0 .. start + t, all
    // written above; query head hh reads KV head hh / G (grouped-query).
    const float* keys = session.keys(l, 0);
    const float* values = session.values(l, 0);
    parallel(pool_, T * H, [&](size_t begin, size_t end) {
      std::vector<float> scratch(static_cast<size_t>(start) + T);
      for (size_t item = begin; item < end; ++item) {
        const size_t t = item / H, hh = item % H, g = hh / G;
        attention(q.data() + t * qd + hh * hd, keys + g * hd, kvd, values + g * hd, kvd,
                  static_cast<size_t>(start) + t + 1, hd, hd, scale, scratch.data(), attn.data() + t * qd + hh * hd);
      }
    });
    matmul(L.o.view(), attn.data(), T, delta.data(), pool_);
    for (size_t i = 0; i < T * d; ++i) x[i] = x[i] + delta[i];

    // SwiGLU MLP block.
    for (size_t t = 0; t < T; ++t) rmsnorm(x.data() + t * d, L.post_attention_norm.data(), d, eps, h.data() + t * d);
    matmul(L.gate.view(), h.data(), T, gate.data(), pool_);
    matmul(L.up.view(), h.data(), T, up.data(), pool_);
    for (size_t i = 0; i < T * I; ++i) gate[i] = silu(gate[i]) * up[i];
    matmul(L.down.view(), gate.data(), T, delta.data(), pool_);
    for (size_t i = 0; i < T * d; ++i) x[i] = x[i] + delta[i];
  }

  const size_t rows = all_logits ? T : 1, first = T - rows;
  for (size_t r = 0; r < rows; ++r) rmsnorm(x.data() + (first + r) * d, w.final_norm.data(), d, eps, h.data() + r * d);
  std::vector<float> logits(rows * V);
  matmul(w.output().view(), h.data(), rows, logits.data(), pool_);
  session.commit(static_cast<int64_t>(T));
  return logits;
}

}  // namespace deltafin
