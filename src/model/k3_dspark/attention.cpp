// DSpark's MLA over the 7 query rows (k3-model.md §10.2), in the absorbed
// ("compact latent") form the drafter was built for: the cache holds only the
// normalised latent and the rotated k_r per position, the query's nope part is
// folded through W_k into latent space, and values are read in latent space
// and expanded by W_v once per head. (The target's exact path forbids this
// re-association, §7.4; DSpark only proposes, so it uses its own numerics.)
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/k3_dspark/model.h"
#include "model/k3_dspark/numerics.h"
#include "util/thread_pool.h"

namespace deltafin {

void DSparkModel::attention(int64_t layer, const Rows& x, Rows& out) {
  const DSparkLayerWeights& lw = w_.layers[static_cast<size_t>(layer)];
  const size_t Q = x.T, H = static_cast<size_t>(c_.num_attention_heads);
  const size_t r = static_cast<size_t>(c_.kv_lora_rank), rope = static_cast<size_t>(c_.qk_rope_head_dim);
  const size_t nope = static_cast<size_t>(c_.qk_nope_head_dim), dv = static_cast<size_t>(c_.v_head_dim);
  const size_t qk = nope + rope, kw = key_width(), ctx = static_cast<size_t>(length_);

  // q = q_b · RMSNorm(q_a · x), per head [nope ‖ rope], the rope part rotated.
  Rows qa, q;
  linear_bf16(lw.q_a, x, qa, pool_);
  for (size_t t = 0; t < Q; ++t) rmsnorm_bf16(qa.row(t), lw.q_a_norm.data(), qa.n, eps_, qa.row(t));
  linear_bf16(lw.q_b, qa, q, pool_);
  for (size_t t = 0; t < Q; ++t)
    for (size_t h = 0; h < H; ++h) yarn_rotate(yarn_, length_ + static_cast<int64_t>(t), q.row(t) + h * qk + nope);

  // The query rows' own keys, formed exactly as the context's; not cached.
  Rows own;
  latent_rows(layer, x, length_, own);

  // Per head: q_lat = W_kᵀ·q_nope; score_j = [q_lat ‖ q_rope]·[latent_j ‖ k_r,j]
  // over the cached context then the 7 query rows (no mask: the query rows see
  // each other), times the scale; softmax in fp32, probabilities cast to BF16;
  // o_lat = Σ p_j latent_j; o = W_v·o_lat.
  Rows heads(Q, H * dv);
  const std::vector<float>& cache = cache_[static_cast<size_t>(layer)];
  const size_t keys = ctx + Q;
  const float scale = yarn_.attention_scale;
  auto run_heads = [&](size_t begin, size_t end) {
    Rows q_nope(Q, nope), q_lat(Q, r), o_lat(Q, r), o(Q, dv);
    std::vector<float> query(kw), p(keys);
    for (size_t h = begin; h < end; ++h) {
      for (size_t t = 0; t < Q; ++t)
        for (size_t i = 0; i < nope; ++i) q_nope.row(t)[i] = q.row(t)[h * qk + i];
      const Matrix& wkt = w_k_t_[static_cast<size_t>(layer)];
      WeightView wk{WeightType::BF16, r, nope, wkt.storage.data() + h * r * nope * 2, nullptr};
      matmul(wk, q_nope.v.data(), Q, q_lat.v.data(), nullptr);
      round_bf16(q_lat.v.data(), q_lat.v.size());
      for (size_t t = 0; t < Q; ++t) {
        for (size_t i = 0; i < r; ++i) query[i] = q_lat.row(t)[i];
        for (size_t i = 0; i < rope; ++i) query[r + i] = q.row(t)[h * qk + nope + i];
        for (size_t j = 0; j < keys; ++j) {
          const float* key = j < ctx ? cache.data() + j * kw : own.row(j - ctx);
          p[j] = dot(query.data(), key, kw) * scale;
        }
        softmax(p.data(), keys);
        round_bf16(p.data(), keys);
        float* acc = o_lat.row(t);
        for (size_t i = 0; i < r; ++i) acc[i] = 0.0f;
        for (size_t j = 0; j < keys; ++j) {
          const float* key = j < ctx ? cache.data() + j * kw : own.row(j - ctx);
          axpy(p[j], key, acc, r);  // the latent is the first r values of the row
        }
        round_bf16(acc, r);
      }
      // W_v of head h: rows [h·(nope+dv) + nope, +dv) of kv_b, contiguous.
      WeightView wv{WeightType::BF16, dv, r, lw.kv_b.storage.data() + (h * (nope + dv) + nope) * r * 2, nullptr};
      matmul(wv, o_lat.v.data(), Q, o.v.data(), nullptr);
      round_bf16(o.v.data(), o.v.size());
      for (size_t t = 0; t < Q; ++t)
        for (size_t i = 0; i < dv; ++i) heads.row(t)[h * dv + i] = o.row(t)[i];
    }
  };
  if (pool_)
    pool_->parallel_for(H, run_heads);
  else
    run_heads(0, H);

  linear_bf16(lw.o, heads, out, pool_);
}

}  // namespace deltafin
