#include "model/k3_dspark/model.h"

#include <cstring>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/k3_dspark/numerics.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

size_t z(int64_t x) { return static_cast<size_t>(x); }

void check_matrix(const Matrix& m, size_t rows, size_t cols, const char* what) {
  if (m.rows != rows || m.cols != cols)
    fail("DSpark: the target's ", what, " is [", m.rows, ", ", m.cols, "], expected [", rows, ", ", cols, "]");
}

}  // namespace

DSparkModel::DSparkModel(const DSparkConfig& config, const DSparkWeights& weights, const K3Weights& target,
                         ThreadPool* pool)
    : c_(config), w_(weights), target_(target), pool_(pool), yarn_(make_dspark_yarn(config)),
      eps_(static_cast<float>(config.rms_norm_eps)) {
  if (w_.layers.size() != z(c_.num_hidden_layers))
    fail("DSpark: ", w_.layers.size(), " layers of weights for num_hidden_layers = ", c_.num_hidden_layers);
  check_matrix(target_.embed, z(c_.vocab_size), z(c_.hidden_size), "embedding");
  check_matrix(target_.lm_head, z(c_.vocab_size), z(c_.hidden_size), "lm_head");
  // The embedding is always BF16 (k3-model.md §5.2: a lookup reads one row).
  if (target_.embed.type != WeightType::BF16) fail("DSpark: the target's embedding is not BF16");

  const size_t H = z(c_.num_attention_heads), r = z(c_.kv_lora_rank), nope = z(c_.qk_nope_head_dim);
  const size_t kv_head = z(c_.qk_nope_head_dim + c_.v_head_dim);
  for (const DSparkLayerWeights& lw : w_.layers) {
    // Transposing moves BF16 bit patterns: exact.
    Matrix t;
    t.type = WeightType::BF16;
    t.rows = H * r;
    t.cols = nope;
    t.storage.resize(H * r * nope * 2);
    const uint16_t* src = reinterpret_cast<const uint16_t*>(lw.kv_b.storage.data());
    uint16_t* dst = reinterpret_cast<uint16_t*>(t.storage.data());
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < nope; ++i)
        for (size_t c = 0; c < r; ++c) dst[(h * r + c) * nope + i] = src[(h * kv_head + i) * r + c];
    w_k_t_.push_back(std::move(t));
  }
  cache_.assign(z(c_.num_hidden_layers), {});
}

void DSparkModel::latent_rows(int64_t layer, const Rows& x, int64_t first_position, Rows& out) {
  const DSparkLayerWeights& lw = w_.layers[z(layer)];
  const size_t r = z(c_.kv_lora_rank);
  linear_bf16(lw.kv_a, x, out, pool_);  // [T, r + rope]
  for (size_t t = 0; t < out.T; ++t) {
    float* row = out.row(t);
    rmsnorm_bf16(row, lw.kv_a_norm.data(), r, eps_, row);
    yarn_rotate(yarn_, first_position + static_cast<int64_t>(t), row + r);
  }
}

void DSparkModel::append_context(const Rows& captured, size_t rows) {
  if (captured.n != z(c_.context_width()))
    fail("DSpark: captured rows have width ", captured.n, ", expected num_target_layers x target_hidden_size = ",
         c_.context_width(), " (set the target's capture layers to target_layers())");
  if (rows > captured.T) fail("DSpark: ", rows, " context rows requested from ", captured.T, " captured rows");
  if (rows == 0) return;
  Rows in(rows, captured.n);
  std::memcpy(in.v.data(), captured.v.data(), rows * captured.n * sizeof(float));
  // c = RMSNorm(context_proj · row; context_norm): the target's state, in
  // DSpark's width, becomes keys and values of every DSpark layer. The rows
  // never run through the layers themselves.
  Rows c;
  linear_bf16(w_.context_proj, in, c, pool_);
  for (size_t t = 0; t < rows; ++t) rmsnorm_bf16(c.row(t), w_.context_norm.data(), c.n, eps_, c.row(t));
  // One kv_a product per layer; each output is one canonical reduction, so
  // this equals the fused [layers·(r+rope), h] product bit for bit.
  for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
    Rows kv;
    latent_rows(l, c, length_, kv);
    std::vector<float>& cache = cache_[z(l)];
    cache.insert(cache.end(), kv.v.begin(), kv.v.end());
  }
  length_ += static_cast<int64_t>(rows);
}

void DSparkModel::truncate_context(int64_t length) {
  if (length < 0 || length > length_)
    fail("DSpark: cannot truncate the context to ", length, " rows (it holds ", length_, ")");
  for (std::vector<float>& cache : cache_) cache.resize(z(length) * key_width());
  length_ = length;
}

void DSparkModel::mlp(int64_t layer, const Rows& x, Rows& out) {
  const DSparkLayerWeights& lw = w_.layers[z(layer)];
  Rows g, u;
  linear_bf16(lw.gate, x, g, pool_);
  linear_bf16(lw.up, x, u, pool_);
  // SwiGLU: down(silu(gate·x) ⊙ up·x), silu and the product each rounded.
  for (size_t i = 0; i < g.v.size(); ++i) g.v[i] = round_bf16(round_bf16(silu(g.v[i])) * u.v[i]);
  linear_bf16(lw.down, g, out, pool_);
}

DSparkModel::Proposal DSparkModel::propose(uint32_t anchor, int n) {
  if (n < 1 || n > kDSparkQueryRows) fail("DSpark: ", n, " drafts requested, expected 1..", kDSparkQueryRows);
  if (static_cast<int64_t>(anchor) >= c_.vocab_size)
    fail("DSpark: anchor token ", anchor, " is outside the vocabulary of ", c_.vocab_size);
  const size_t Q = kDSparkQueryRows, h = z(c_.hidden_size);

  // [anchor, MASK x 6], embedded with the target's BF16 table (already BF16 values).
  Rows hidden(Q, h), residual;
  const uint16_t* embed = reinterpret_cast<const uint16_t*>(target_.embed.storage.data());
  for (size_t t = 0; t < Q; ++t) {
    const size_t token = t == 0 ? anchor : z(c_.mask_token_id);
    for (size_t i = 0; i < h; ++i) hidden.row(t)[i] = bf16_to_f32(embed[token * h + i]);
  }

  Rows acc(Q, h), x(Q, h), a;
  for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
    const DSparkLayerWeights& lw = w_.layers[z(l)];
    // Pre-norm decoder layer with the residual carried separately (the
    // fused add-norm form): acc = residual + hidden, acc += MLA(norm(acc)).
    for (size_t i = 0; i < acc.v.size(); ++i)
      acc.v[i] = l == 0 ? hidden.v[i] : round_bf16(residual.v[i] + hidden.v[i]);
    for (size_t t = 0; t < Q; ++t) rmsnorm_bf16(acc.row(t), lw.input_norm.data(), h, eps_, x.row(t));
    attention(l, x, a);
    for (size_t i = 0; i < acc.v.size(); ++i) acc.v[i] = round_bf16(acc.v[i] + a.v[i]);
    for (size_t t = 0; t < Q; ++t) rmsnorm_bf16(acc.row(t), lw.post_attention_norm.data(), h, eps_, x.row(t));
    mlp(l, x, hidden);
    residual = acc;
  }
  Rows out(Q, h);
  for (size_t t = 0; t < Q; ++t) {
    for (size_t i = 0; i < h; ++i) out.row(t)[i] = round_bf16(residual.row(t)[i] + hidden.row(t)[i]);
    rmsnorm_bf16(out.row(t), w_.final_norm.data(), h, eps_, out.row(t));
  }

  // Scores: the target's lm_head in fp32 (no rounding: these are logits, not
  // activations), plus the Markov bias of the previous token.
  const size_t N = static_cast<size_t>(n), V = z(c_.vocab_size), rank = z(c_.markov_rank);
  Rows scores(N, V);
  matmul(target_.lm_head.view(), out.v.data(), N, scores.v.data(), pool_);
  Proposal p;
  const uint16_t* w1 = reinterpret_cast<const uint16_t*>(w_.markov_w1.storage.data());
  std::vector<float> feature(h + rank), bias(V);
  uint32_t prev = anchor;
  for (size_t j = 0; j < N; ++j) {
    // bias = markov_w2 · markov_w1[prev], a BF16 linear output.
    std::memcpy(feature.data(), out.row(j), h * sizeof(float));
    for (size_t i = 0; i < rank; ++i) feature[h + i] = bf16_to_f32(w1[z(prev) * rank + i]);
    matmul(w_.markov_w2.view(), feature.data() + h, 1, bias.data(), pool_);
    float* s = scores.row(j);
    for (size_t v = 0; v < V; ++v) s[v] = s[v] + round_bf16(bias[v]);
    const uint32_t d = argmax_first(s, V);
    // confidence_head.proj · [out_j ‖ markov_w1[prev_j]] + bias: fp32
    // accumulation with the bias, one rounding (a BF16 linear with bias).
    const float conf = round_bf16(dot(w_.confidence_w.data(), feature.data(), h + rank) + w_.confidence_bias);
    p.tokens.push_back(d);
    p.confidence.push_back(conf);
    prev = d;
  }
  last_output_ = std::move(out);
  last_scores_ = std::move(scores);
  return p;
}

}  // namespace deltafin
