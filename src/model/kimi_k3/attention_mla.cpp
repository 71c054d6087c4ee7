// Gated NoPE MLA (k3-model.md §7.4) over the latent cache: no positional
// encoding (the "rope" part of q and k is used unrotated), and per position
// only the normalised latent c (r_kv) and k_r (d_rope) are kept — 2,304 bytes
// per position for K3 instead of 120 KiB of expanded keys and values.
//
// Absorbed form. Head h's key and value at position j are kv_b_proj of the
// latent: k_j = [W_k,h c_j ‖ k_r,j], v_j = W_v,h c_j. So
//   score_j = dot(q_h, k_j) = dot([W_k,h^T q_nope,h ‖ q_rope,h], [c_j ‖ k_r,j])
//   o_h     = sum_j p_j v_j = W_v,h (sum_j p_j c_j).
// Every reduction has one fixed order, whatever the pass width, slicing,
// thread count or ISA path: the absorbed query is a canonical product
// (kv_b_key_t, weights.h), each score one canonical dot over r_kv + d_rope,
// the weighted sum acc = acc + p_j c_j over j ascending, and W_v,h u one
// canonical product. A row's result depends only on that row and the cache,
// so a T-position pass equals T one-position passes bit for bit. (It differs
// from the expanded form in the last bits — a re-association the exactness
// contract allows, §12 — and stays within tolerance of the float64
// reference, which keeps the expanded form: tests/kimi_k3/reference_k3.cpp.)
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/kimi_k3/model.h"
#include "util/error.h"

namespace deltafin {

namespace {

// Rows [first, first + n) of a matrix, as a view of its own.
WeightView row_block(const WeightView& w, size_t first, size_t n) {
  WeightView v = w;
  v.rows = n;
  size_t bytes_per_row = 0;
  switch (w.type) {
    case WeightType::F32: bytes_per_row = w.cols * 4; break;
    case WeightType::BF16: bytes_per_row = w.cols * 2; break;
    case WeightType::Int8Row: bytes_per_row = w.cols; break;
    case WeightType::MXFP4: fail("row_block: MXFP4 spine matrices do not exist");
  }
  v.data = static_cast<const uint8_t*>(w.data) + first * bytes_per_row;
  if (w.type == WeightType::Int8Row) v.scales = static_cast<const uint16_t*>(w.scales) + first;
  return v;
}

}  // namespace

void K3Model::attention_mla(int64_t layer, K3Session& s, const Rows& x, Rows& out, size_t offset) {
  const MlaWeights& w = w_.layers[static_cast<size_t>(layer)].mla;
  MlaCache& cache = s.mla(layer);
  const size_t T = x.T, H = static_cast<size_t>(c_.num_attention_heads);
  const size_t nope = static_cast<size_t>(c_.qk_nope_head_dim), rope = static_cast<size_t>(c_.qk_rope_head_dim);
  const size_t dk = nope + rope, dv = static_cast<size_t>(c_.v_head_dim);
  const size_t rq = w.q_a.rows, rkv = static_cast<size_t>(c_.kv_lora_rank), R = rkv + rope;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));  // (float)(192^-0.5) for K3

  Rows qa(T, rq), q(T, H * dk), ckv(T, rkv + rope), gate(T, H * dv);
  matmul(w.q_a.view(), x.v.data(), T, qa.v.data(), pool_);
  for (size_t t = 0; t < T; ++t) rmsnorm(qa.row(t), w.q_a_norm.data(), rq, eps, qa.row(t));
  matmul(w.q_b.view(), qa.v.data(), T, q.v.data(), pool_);
  matmul(w.kv_a.view(), x.v.data(), T, ckv.v.data(), pool_);
  matmul(w.g.view(), x.v.data(), T, gate.v.data(), pool_);

  // Append the T new positions: [RMSNorm(c_lat) ‖ k_r].
  const size_t base = static_cast<size_t>(s.length()) + offset;
  if (cache.latent.size() != base * R)
    fail("attention_mla: layer ", layer, " cache holds ", cache.latent.size() / R, " positions, expected ", base);
  cache.latent.resize((base + T) * R);
  for (size_t t = 0; t < T; ++t) {
    float* row = cache.latent.data() + (base + t) * R;
    rmsnorm(ckv.row(t), w.kv_a_norm.data(), rkv, eps, row);
    std::copy(ckv.row(t) + rkv, ckv.row(t) + rkv + rope, row + rkv);
  }

  // Absorbed queries, per row and head: [W_k,h^T q_nope,h ‖ q_rope,h] (R floats).
  Rows qabs(T, H * R);
  {
    Rows qn(T, nope), qk(T, rkv);
    const WeightView wk = w.kv_b_key_t.view();
    for (size_t h = 0; h < H; ++h) {
      for (size_t t = 0; t < T; ++t) std::copy(q.row(t) + h * dk, q.row(t) + h * dk + nope, qn.row(t));
      matmul(row_block(wk, h * rkv, rkv), qn.v.data(), T, qk.v.data(), pool_);
      for (size_t t = 0; t < T; ++t) {
        float* dst = qabs.row(t) + h * R;
        std::copy(qk.row(t), qk.row(t) + rkv, dst);
        std::copy(q.row(t) + h * dk + nope, q.row(t) + h * dk + dk, dst + rkv);
      }
    }
  }

  // Causal: position base + t sees cached positions 0 .. base + t. u[t][h]
  // is head h's attention-weighted latent. All heads share the cache rows,
  // so the rows are swept twice per query row — once for every head's
  // scores, once for every head's weighted sum — rather than twice per head:
  // a long cache is read from memory 2 times per row instead of 2H. Each
  // score and each sum is the same canonical dot / ascending axpy a per-head
  // loop would do (ops.h attention()), so the bits do not depend on the loop
  // order.
  Rows u(T, H * rkv);
  std::vector<float> scores(H * (base + T));
  for (size_t t = 0; t < T; ++t) {
    const size_t n = base + t + 1;
    const float* q_t = qabs.row(t);
    for (size_t j = 0; j < n; ++j) {
      if ((j & 1023) == 0) stop_if_cancelled();  // a long context is seconds of work per row
      const float* row = cache.latent.data() + j * R;
      for (size_t h = 0; h < H; ++h) scores[h * n + j] = dot(q_t + h * R, row, R) * scale;
    }
    for (size_t h = 0; h < H; ++h) softmax(scores.data() + h * n, n);
    float* u_t = u.row(t);
    for (size_t i = 0; i < H * rkv; ++i) u_t[i] = 0.0f;
    for (size_t j = 0; j < n; ++j) {
      if ((j & 1023) == 0) stop_if_cancelled();
      const float* row = cache.latent.data() + j * R;
      for (size_t h = 0; h < H; ++h) axpy(scores[h * n + j], row, u_t + h * rkv, rkv);
    }
  }

  // o_h = W_v,h u_h (kv_b's value rows of head h, a contiguous block), gated.
  Rows o(T, H * dv);
  {
    Rows uh(T, rkv), oh(T, dv);
    const WeightView wkv = w.kv_b.view();
    for (size_t h = 0; h < H; ++h) {
      for (size_t t = 0; t < T; ++t) std::copy(u.row(t) + h * rkv, u.row(t) + (h + 1) * rkv, uh.row(t));
      matmul(row_block(wkv, h * (nope + dv) + nope, dv), uh.v.data(), T, oh.v.data(), pool_);
      for (size_t t = 0; t < T; ++t) std::copy(oh.row(t), oh.row(t) + dv, o.row(t) + h * dv);
    }
  }
  for (size_t t = 0; t < T; ++t)
    for (size_t i = 0; i < H * dv; ++i) o.row(t)[i] = o.row(t)[i] * sigmoid(gate.row(t)[i]);
  matmul(w.o.view(), o.v.data(), T, out.v.data(), pool_);
}

}  // namespace deltafin
