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

#include "kernels/weights.h"
#include "model/kimi_k3/model.h"
#include "util/error.h"

namespace deltafin {

void K3Model::attention_mla(int64_t layer, K3Session& s, const Act& x, Act& out, size_t offset) {
  const MlaWeights& w = w_.layers[static_cast<size_t>(layer)].mla;
  MlaCache& cache = s.mla(layer);
  const size_t T = x.rows(), H = static_cast<size_t>(c_.num_attention_heads);
  const size_t nope = static_cast<size_t>(c_.qk_nope_head_dim), rope = static_cast<size_t>(c_.qk_rope_head_dim);
  const size_t dk = nope + rope, dv = static_cast<size_t>(c_.v_head_dim);
  const size_t rq = w.q_a.rows, rkv = static_cast<size_t>(c_.kv_lora_rank), R = rkv + rope;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));  // (float)(192^-0.5) for K3

  Act qa = be_.act(T, rq), q = be_.act(T, H * dk), ckv = be_.act(T, R), gate = be_.act(T, H * dv);
  be_.matmul(w.q_a.view(), x, qa);
  be_.rmsnorm(qa, w.q_a_norm, eps, qa);
  be_.matmul(w.q_b.view(), qa, q);
  be_.matmul(w.kv_a.view(), x, ckv);
  be_.matmul(w.g.view(), x, gate);

  // Append the T new positions: [RMSNorm(c_lat) ‖ k_r].
  const size_t base = static_cast<size_t>(s.length()) + offset;
  if (cache.latent.size() != base * R)
    fail("attention_mla: layer ", layer, " cache holds ", cache.latent.size() / R, " positions, expected ", base);
  cache.latent.resize((base + T) * R);
  const LatentLayer latent{cache.latent.data(), rkv, rope};
  be_.latent_store(ckv, w.kv_a_norm, eps, latent, static_cast<int64_t>(base));

  // Absorbed queries, per row and head: [W_k,h^T q_nope,h ‖ q_rope,h] (R floats).
  Act qabs = be_.act(T, H * R);
  {
    Act qn = be_.act(T, nope), qk = be_.act(T, rkv);
    const WeightView wk = w.kv_b_key_t.view();
    for (size_t h = 0; h < H; ++h) {
      be_.copy_cols(q, h * dk, nope, qn, 0);
      be_.matmul(weight_rows(wk, h * rkv, rkv), qn, qk);
      be_.copy_cols(qk, 0, rkv, qabs, h * R);
      be_.copy_cols(q, h * dk + nope, rope, qabs, h * R + rkv);
    }
  }

  // Causal: position base + t sees cached positions 0 .. base + t. u[t][h]
  // is head h's attention-weighted latent (Backend::attention_latent).
  Act u = be_.act(T, H * rkv);
  if (!be_.attention_latent(qabs, latent, MlaShape{H, static_cast<int64_t>(base), scale}, u, pass_->poll()))
    stop_if_cancelled();

  // o_h = W_v,h u_h (kv_b's value rows of head h, a contiguous block), gated.
  Act o = be_.act(T, H * dv);
  {
    Act uh = be_.act(T, rkv), oh = be_.act(T, dv);
    const WeightView wkv = w.kv_b.view();
    for (size_t h = 0; h < H; ++h) {
      be_.copy_cols(u, h * rkv, rkv, uh, 0);
      be_.matmul(weight_rows(wkv, h * (nope + dv) + nope, dv), uh, oh);
      be_.copy_cols(oh, 0, dv, o, h * dv);
    }
  }
  be_.mul_sigmoid(o, gate);
  be_.matmul(w.o.view(), o, out);
}

}  // namespace deltafin
