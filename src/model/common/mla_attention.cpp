#include "model/common/mla_attention.h"

#include "util/error.h"

namespace deltafin {

namespace {

constexpr size_t kBlock = kFp8BlockSize;  // the FP8 releases' scale block (weight_block_size)

// kv_b's rows of head h (values: offset d_nope) start on a scale block for every head.
bool block_aligned(const MlaDims& d) { return d.nope % kBlock == 0 && (d.nope + d.dv) % kBlock == 0; }

Matrix key_transpose(const Matrix& kv_b, const MlaDims& d) {
  const size_t rkv = kv_b.cols, H = d.heads, nope = d.nope, dv = d.dv;
  if (kv_b.rows != H * (nope + dv))
    fail("kv_b_proj has ", kv_b.rows, " rows, expected ", H, " heads x (", nope, " + ", dv, ")");
  Matrix t;
  t.rows = H * rkv;
  t.cols = nope;
  const WeightView v = kv_b.view();
  if (kv_b.type == WeightType::BF16) {
    t.type = WeightType::BF16;
    t.storage.resize(t.rows * t.cols * 2);
    const auto* src = static_cast<const uint16_t*>(v.data);
    auto* dst = reinterpret_cast<uint16_t*>(t.storage.data());
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < nope; ++i)
        for (size_t c = 0; c < rkv; ++c) dst[(h * rkv + c) * nope + i] = src[(h * (nope + dv) + i) * rkv + c];
  } else {
    t.type = WeightType::F32;
    t.storage.resize(t.rows * t.cols * 4);
    auto* dst = reinterpret_cast<float*>(t.storage.data());
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < nope; ++i)
        for (size_t c = 0; c < rkv; ++c) dst[(h * rkv + c) * nope + i] = weight_at(v, h * (nope + dv) + i, c);
  }
  return t;
}

Matrix value_rows_f32(const Matrix& kv_b, const MlaDims& d) {
  const size_t rkv = kv_b.cols;
  Matrix m;
  m.type = WeightType::F32;
  m.rows = d.heads * d.dv;
  m.cols = rkv;
  m.storage.resize(m.rows * m.cols * 4);
  auto* dst = reinterpret_cast<float*>(m.storage.data());
  const WeightView v = kv_b.view();
  for (size_t h = 0; h < d.heads; ++h)
    for (size_t i = 0; i < d.dv; ++i)
      for (size_t c = 0; c < rkv; ++c) dst[(h * d.dv + i) * rkv + c] = weight_at(v, h * (d.nope + d.dv) + d.nope + i, c);
  return m;
}

bool needs_value_copy(const MlaDims& d, WeightType t) { return t == WeightType::FP8Block && !block_aligned(d); }

}  // namespace

uint64_t mla_derived_bytes(const MlaDims& d, WeightType t) {
  uint64_t bytes = static_cast<uint64_t>(d.heads * d.rank * d.nope) * (t == WeightType::BF16 ? 2 : 4);
  if (needs_value_copy(d, t)) bytes += static_cast<uint64_t>(d.heads * d.dv * d.rank) * 4;
  return bytes;
}

uint64_t mla_derive(MlaWeights& w, const MlaDims& d) {
  w.kv_b_key_t = key_transpose(w.kv_b, d);
  if (needs_value_copy(d, w.kv_b.type)) w.kv_b_values = value_rows_f32(w.kv_b, d);
  return w.kv_b_key_t.storage.size() + w.kv_b_values.storage.size();
}


bool mla_attention(Backend& be, const MlaDims& d, const MlaWeights& w, LatentLayer cache, int64_t base, const Act& x,
                   Act& out, MlaRope rope, const std::function<bool()>& stop) {
  const size_t T = x.rows(), H = d.heads, nope = d.nope, dk = d.nope + d.rope, dv = d.dv, rkv = d.rank;
  const size_t R = rkv + d.rope;

  // The query, and the latent with k_r for the cache.
  Act q = be.act(T, H * dk), ckv = be.act(T, R);
  if (w.q_a.rows) {
    Act qa = be.act(T, w.q_a.rows);
    be.matmul(w.q_a.view(), x, qa);
    be.rmsnorm(qa, w.q_a_norm, d.eps, qa);
    be.matmul(w.q_b.view(), qa, q);
  } else {
    be.matmul(w.q.view(), x, q);
  }
  be.matmul(w.kv_a.view(), x, ckv);
  Act gate;
  if (w.g.rows) {
    gate = be.act(T, H * dv);
    be.matmul(w.g.view(), x, gate);
  }

  // RoPE on k_r (one head, shared) before it is cached, and on each head's
  // q_rope; NoPE keeps both as computed.
  Act q_rope;
  if (rope.cos) {
    Act k_rope = be.act(T, d.rope);
    be.copy_cols(ckv, rkv, d.rope, k_rope, 0);
    be.rope_pairs(k_rope, d.rope, *rope.cos, *rope.sin);
    be.copy_cols(k_rope, 0, d.rope, ckv, rkv);
    q_rope = be.act(T, H * d.rope);
    for (size_t h = 0; h < H; ++h) be.copy_cols(q, h * dk + nope, d.rope, q_rope, h * d.rope);
    be.rope_pairs(q_rope, d.rope, *rope.cos, *rope.sin);
  }
  be.latent_store(ckv, w.kv_a_norm, d.eps, cache, base);

  // Absorbed queries, per row and head: [W_k,h^T q_nope,h ‖ q_rope,h] (R floats).
  Act qabs = be.act(T, H * R);
  {
    Act qn = be.act(T, nope), qk = be.act(T, rkv);
    const WeightView wk = w.kv_b_key_t.view();
    for (size_t h = 0; h < H; ++h) {
      be.copy_cols(q, h * dk, nope, qn, 0);
      be.matmul(weight_rows(wk, h * rkv, rkv), qn, qk);
      be.copy_cols(qk, 0, rkv, qabs, h * R);
      if (rope.cos)
        be.copy_cols(q_rope, h * d.rope, d.rope, qabs, h * R + rkv);
      else
        be.copy_cols(q, h * dk + nope, d.rope, qabs, h * R + rkv);
    }
  }

  // Causal: position base + t sees cached positions 0 .. base + t. u[t][h]
  // is head h's attention-weighted latent (Backend::attention_latent).
  Act u = be.act(T, H * rkv);
  if (!be.attention_latent(qabs, cache, MlaShape{H, base, d.scale}, u, stop)) return false;

  // o_h = W_v,h u_h (kv_b's value rows of head h, a contiguous block), gated.
  Act o = be.act(T, H * dv);
  {
    Act uh = be.act(T, rkv), oh = be.act(T, dv);
    const bool copied = w.kv_b_values.rows != 0;
    const WeightView wv = copied ? w.kv_b_values.view() : w.kv_b.view();
    for (size_t h = 0; h < H; ++h) {
      be.copy_cols(u, h * rkv, rkv, uh, 0);
      be.matmul(weight_rows(wv, copied ? h * dv : h * (nope + dv) + nope, dv), uh, oh);
      be.copy_cols(oh, 0, dv, o, h * dv);
    }
  }
  if (w.g.rows) be.mul_sigmoid(o, gate);
  be.matmul(w.o.view(), o, out);
  return true;
}

}  // namespace deltafin
