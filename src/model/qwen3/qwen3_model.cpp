#include "model/qwen3/qwen3_model.h"

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

Qwen3Model::Qwen3Model(const Qwen3Config& config, const Qwen3Weights& weights, ThreadPool* pool)
    : config_(config), weights_(weights), pool_(pool), rope_(make_qwen3_rope(config)) {
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

  const size_t d = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> cos_t, sin_t;
  qwen3_rope_tables(rope_, start, T, cos_t, sin_t);

  std::vector<float> x(T * d), h(T * d), delta(T * d), gate(T * I), up(T * I);
  for (size_t t = 0; t < T; ++t)
    for (size_t j = 0; j < d; ++j) x[t * d + j] = bf16_to_f32(w.embed.bf16_at(tokens[t], j));

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Qwen3LayerWeights& L = w.layers[l];
    qwen3_attention_block(c, L.attn, l, session, start, T, cos_t.data(), sin_t.data(), x.data(), pool_);
    // SwiGLU MLP block.
    for (size_t t = 0; t < T; ++t) rmsnorm(x.data() + t * d, L.post_attention_norm.data(), d, eps, h.data() + t * d);
    // SwiGLU on each thread's rows inside the products' hand-off (elementwise: no bit changes).
    matmul_pair(L.gate.view(), L.up.view(), h.data(), T, gate.data(), up.data(), pool_, [&](size_t rb, size_t re) {
      for (size_t t = 0; t < T; ++t)
        for (size_t i = t * I + rb; i < t * I + re; ++i) gate[i] = silu(gate[i]) * up[i];
    });
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
