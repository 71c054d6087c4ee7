// Gated NoPE MLA (k3-model.md §7.4): no positional encoding, the "rope" part
// of q and k is used unrotated; K and V are cached in fp32, expanded (the
// absorbed form would re-associate contractions and is not allowed).
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/kimi_k3/model.h"
#include "util/error.h"

namespace deltafin {

void K3Model::attention_mla(int64_t layer, K3Session& s, const Rows& x, Rows& out, size_t offset) {
  const MlaWeights& w = w_.layers[static_cast<size_t>(layer)].mla;
  MlaCache& cache = s.mla(layer);
  const size_t T = x.T, H = static_cast<size_t>(c_.num_attention_heads);
  const size_t nope = static_cast<size_t>(c_.qk_nope_head_dim), rope = static_cast<size_t>(c_.qk_rope_head_dim);
  const size_t dk = nope + rope, dv = static_cast<size_t>(c_.v_head_dim);
  const size_t rq = w.q_a.rows, rkv = static_cast<size_t>(c_.kv_lora_rank);
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));  // (float)(192^-0.5) for K3

  Rows qa(T, rq), q(T, H * dk), ckv(T, rkv + rope), lat(T, rkv), kv(T, H * (nope + dv)), gate(T, H * dv);
  matmul(w.q_a.view(), x.v.data(), T, qa.v.data(), pool_);
  for (size_t t = 0; t < T; ++t) rmsnorm(qa.row(t), w.q_a_norm.data(), rq, eps, qa.row(t));
  matmul(w.q_b.view(), qa.v.data(), T, q.v.data(), pool_);
  matmul(w.kv_a.view(), x.v.data(), T, ckv.v.data(), pool_);
  for (size_t t = 0; t < T; ++t) rmsnorm(ckv.row(t), w.kv_a_norm.data(), rkv, eps, lat.row(t));
  matmul(w.kv_b.view(), lat.v.data(), T, kv.v.data(), pool_);
  matmul(w.g.view(), x.v.data(), T, gate.v.data(), pool_);

  // Append the T new positions: k = [k_nope ‖ k_r] per head (k_r shared), v.
  const size_t base = static_cast<size_t>(s.length()) + offset;
  if (cache.keys.size() != base * H * dk)
    fail("attention_mla: layer ", layer, " cache holds ", cache.keys.size() / (H * dk), " positions, expected ", base);
  cache.keys.resize((base + T) * H * dk);
  cache.values.resize((base + T) * H * dv);
  for (size_t t = 0; t < T; ++t) {
    float* kd = cache.keys.data() + (base + t) * H * dk;
    float* vd = cache.values.data() + (base + t) * H * dv;
    const float* kr = ckv.row(t) + rkv;
    for (size_t h = 0; h < H; ++h) {
      const float* src = kv.row(t) + h * (nope + dv);
      std::copy(src, src + nope, kd + h * dk);
      std::copy(kr, kr + rope, kd + h * dk + nope);
      std::copy(src + nope, src + nope + dv, vd + h * dv);
    }
  }

  // Causal: position base + t sees cached positions 0 .. base + t.
  Rows o(T, H * dv);
  std::vector<float> scratch(base + T);
  for (size_t t = 0; t < T; ++t) {
    const size_t n = base + t + 1;
    for (size_t h = 0; h < H; ++h) {
      stop_if_cancelled();  // one row's heads over a long context are seconds of work
      attention(q.row(t) + h * dk, cache.keys.data() + h * dk, H * dk, cache.values.data() + h * dv, H * dv, n, dk, dv,
                scale, scratch.data(), o.row(t) + h * dv);
    }
    for (size_t i = 0; i < H * dv; ++i) o.row(t)[i] = o.row(t)[i] * sigmoid(gate.row(t)[i]);
  }
  matmul(w.o.view(), o.v.data(), T, out.v.data(), pool_);
}

}  // namespace deltafin
