#include "model/qwen3/qwen3_model.h"

#include "backend/cpu_backend.h"
#include "util/error.h"

namespace deltafin {

Qwen3Model::Qwen3Model(const Qwen3Config& config, const Qwen3Weights& weights, Backend& backend)
    : config_(config), weights_(weights), be_(backend), rope_(make_qwen3_rope(config)) {
  if (static_cast<int64_t>(weights.layers.size()) != config.num_hidden_layers ||
      weights.embed.rows != static_cast<size_t>(config.vocab_size) ||
      weights.embed.cols != static_cast<size_t>(config.hidden_size))
    fail("Qwen3 model: the weights were not loaded for this config");
}

Qwen3Model::Qwen3Model(const Qwen3Config& config, const Qwen3Weights& weights, ThreadPool* pool)
    : Qwen3Model(config, weights, *new CpuBackend(pool)) {
  own_backend_.reset(&be_);
}

Qwen3Model::~Qwen3Model() = default;

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

  const size_t d = c.hidden_size, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  rope_rows_.fill(be_, rope_, start, T);
  Act x = be_.act(T, d), h = be_.act(T, d), delta = be_.act(T, d), g = be_.act(T, I);
  be_.embed(w.embed.view(), tokens, x);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Qwen3LayerWeights& L = w.layers[l];
    qwen3_attention_block(be_, c, L.attn, l, session, start, rope_rows_.cos, rope_rows_.sin, x);
    be_.rmsnorm(x, L.post_attention_norm, eps, h);  // the SwiGLU MLP block
    be_.gated_matmul(L.gate.view(), L.up.view(), h, Gate::silu_mul(), g);
    be_.matmul(L.down.view(), g, delta);
    be_.add(x, delta);
  }

  const size_t rows = all_logits ? T : 1, first = T - rows;
  Act last = be_.act(rows, d), normed = be_.act(rows, d), logits = be_.act(rows, c.vocab_size);
  be_.copy_rows(x, first, last);
  be_.rmsnorm(last, w.final_norm, eps, normed);
  be_.matmul(w.output().view(), normed, logits);
  std::vector<float> out(logits.size());
  be_.read(logits, 0, out);
  session.commit(static_cast<int64_t>(T));
  return out;
}

}  // namespace deltafin
