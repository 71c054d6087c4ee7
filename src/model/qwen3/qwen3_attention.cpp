#include "model/qwen3/qwen3_attention.h"

#include <algorithm>
#include <cmath>
#include <numbers>


namespace deltafin {

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
