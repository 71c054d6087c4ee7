// Float64 reference forward pass, straight from k3-model.md §4-§7. See the header.
#include "kimi_k3/reference_k3.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "model/kimi_k3/tensors.h"
#include "format/mxfp4.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin::test {
namespace ref {

Vec matvec(const Mat& w, const Vec& x) {
  if (static_cast<int64_t>(x.size()) != w.cols) fail("reference matvec: input width ", x.size(), " != ", w.cols);
  Vec y(static_cast<size_t>(w.rows), 0.0);
  for (int64_t r = 0; r < w.rows; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < w.cols; ++c) acc += w.at(r, c) * x[static_cast<size_t>(c)];
    y[static_cast<size_t>(r)] = acc;
  }
  return y;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double silu(double x) { return x * sigmoid(x); }

double situ(double g, double u, double beta, double beta_lin) {
  const double gate = std::tanh(g / beta) * beta * sigmoid(g);
  const double up = std::tanh(u / beta_lin) * beta_lin;
  return gate * up;
}

Vec rms_norm(const Vec& x, const Vec& w, double eps) {
  if (!w.empty() && w.size() != x.size()) fail("reference rms_norm: weight width ", w.size(), " != ", x.size());
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = (w.empty() ? 1.0 : w[i]) * (x[i] * r);
  return out;
}

Vec l2_normalize(const Vec& u) {
  double ss = 0;
  for (double v : u) ss += v * v;
  const double n = std::max(std::sqrt(ss), 1e-12);
  Vec out(u.size());
  for (size_t i = 0; i < u.size(); ++i) out[i] = u[i] / n;
  return out;
}

Vec softmax(const Vec& s) {
  double m = -std::numeric_limits<double>::infinity();
  for (double v : s) m = std::max(m, v);
  Vec e(s.size());
  double sum = 0;
  for (size_t j = 0; j < s.size(); ++j) {
    e[j] = std::exp(s[j] - m);
    sum += e[j];
  }
  for (double& v : e) v /= sum;
  return e;
}

Vec mix(const std::vector<Vec>& vs, const Vec& s, double eps) {
  if (vs.empty()) fail("reference mix: no vectors");
  Vec score(vs.size());
  for (size_t j = 0; j < vs.size(); ++j) {
    const Vec key = rms_norm(vs[j], {}, eps);
    double dot = 0;
    for (size_t c = 0; c < key.size(); ++c) dot += key[c] * s[c];
    score[j] = dot;
  }
  const Vec alpha = softmax(score);
  Vec out(vs[0].size(), 0.0);
  for (size_t j = 0; j < vs.size(); ++j)
    for (size_t c = 0; c < out.size(); ++c) out[c] += alpha[j] * vs[j][c];
  return out;
}

Selection select_experts(const Vec& choice, int64_t k) {
  const int64_t n = static_cast<int64_t>(choice.size());
  if (k < 1 || k > n) fail("reference select_experts: k = ", k, " with ", n, " experts");
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (choice[static_cast<size_t>(a)] != choice[static_cast<size_t>(b)])
      return choice[static_cast<size_t>(a)] > choice[static_cast<size_t>(b)];
    return a < b;
  });
  Selection sel;
  sel.ids.assign(order.begin(), order.begin() + k);
  if (k < n)
    sel.margin = choice[static_cast<size_t>(order[static_cast<size_t>(k - 1)])] -
                 choice[static_cast<size_t>(order[static_cast<size_t>(k)])];
  return sel;
}

Vec route_weights(const Vec& sigma, const std::vector<int>& ids) {
  double den = 0;
  for (int id : ids) den += sigma[static_cast<size_t>(id)];
  den += 1e-20;
  Vec w(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) w[i] = sigma[static_cast<size_t>(ids[i])] / den;
  return w;
}

Mat decode_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols) {
  if (cols % 32 != 0) fail("reference decode_mxfp4: ", cols, " columns is not a multiple of 32");
  Mat m{rows, cols, std::vector<double>(static_cast<size_t>(rows * cols))};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t byte = packed[r * (cols / 2) + c / 2];
      const uint8_t nibble = (c % 2 == 0) ? static_cast<uint8_t>(byte & 0xF) : static_cast<uint8_t>(byte >> 4);
      const uint8_t scale = scales[r * (cols / 32) + c / 32];
      m.v[static_cast<size_t>(r * cols + c)] = static_cast<double>(mxfp4_value(nibble, scale));
    }
  return m;
}

Vec short_conv_silu(std::vector<Vec>& history, const Mat& w, const Vec& x) {
  const int64_t kernel = w.cols;
  if (static_cast<int64_t>(history.size()) != kernel - 1) fail("reference conv: history length ", history.size());
  Vec y(x.size());
  for (size_t c = 0; c < x.size(); ++c) {
    double acc = 0;
    for (int64_t j = 0; j < kernel; ++j) {
      const double s = (j == kernel - 1) ? x[c] : history[static_cast<size_t>(j)][c];
      acc += w.at(static_cast<int64_t>(c), j) * s;
    }
    y[c] = silu(acc);
  }
  if (!history.empty()) {
    history.erase(history.begin());
    history.push_back(x);
  }
  return y;
}

Vec kda_head_step(std::vector<double>& S, const Vec& q, const Vec& k, const Vec& v, double beta, const Vec& g) {
  const size_t K = k.size(), V = v.size();
  // S[k, :] <- S[k, :] * exp(g[k])
  for (size_t a = 0; a < K; ++a) {
    const double decay = std::exp(g[a]);
    for (size_t b = 0; b < V; ++b) S[a * V + b] *= decay;
  }
  // delta <- v - sum_k k[k] S[k, :]
  Vec delta(V);
  for (size_t b = 0; b < V; ++b) {
    double pred = 0;
    for (size_t a = 0; a < K; ++a) pred += k[a] * S[a * V + b];
    delta[b] = v[b] - pred;
  }
  // S[k, :] <- S[k, :] + (beta k[k]) delta
  for (size_t a = 0; a < K; ++a) {
    const double bk = beta * k[a];
    for (size_t b = 0; b < V; ++b) S[a * V + b] += bk * delta[b];
  }
  // o <- sum_k q[k] S[k, :]
  Vec o(V, 0.0);
  for (size_t b = 0; b < V; ++b) {
    double acc = 0;
    for (size_t a = 0; a < K; ++a) acc += q[a] * S[a * V + b];
    o[b] = acc;
  }
  return o;
}

Vec layer_walk(const LayerWalk& w, const Vec& embedding) {
  Vec h = embedding;
  std::vector<Vec> anchors;
  auto with_last = [&](const Vec& last) {
    std::vector<Vec> list = anchors;
    list.push_back(last);
    return list;
  };
  for (int64_t i = 0; i < w.layers; ++i) {
    const Vec x_attn = anchors.empty() ? h : w.mix_attn(i, with_last(h));
    const bool block_start = (i % w.block == 0);
    if (block_start) anchors.push_back(h);  // at i = 0, h is the embedding
    const Vec a = w.attention(i, x_attn);
    Vec p = a;
    if (!block_start)
      for (size_t c = 0; c < p.size(); ++c) p[c] = h[c] + a[c];  // prefix + a
    if (w.after_attention) w.after_attention(i, p);
    const Vec x_mlp = w.mix_mlp(i, with_last(p));
    const Vec f = w.mlp(i, x_mlp);
    for (size_t c = 0; c < p.size(); ++c) h[c] = p[c] + f[c];
    if (w.after_layer) w.after_layer(i, h);
  }
  return w.mix_out(with_last(h));
}

}  // namespace ref

namespace {

using ref::Mat;
using ref::Vec;

// ---- Exact widening of checkpoint tensors ----------------------------------

std::vector<double> read_tensor(const K3Checkpoint& ckpt, const std::string& name, const std::vector<uint64_t>& shape) {
  TensorRef t = ckpt.tensor(name);
  if (t.info->shape != shape) {
    std::string want, got;
    for (uint64_t s : shape) want += cat(s, ",");
    for (uint64_t s : t.info->shape) got += cat(s, ",");
    fail("reference: ", name, " has shape [", got, "], expected [", want, "]");
  }
  std::vector<uint8_t> raw(t.info->bytes());
  t.shard->read(*t.info, raw.data());
  const size_t n = static_cast<size_t>(t.info->elements());
  std::vector<double> out(n);
  if (t.info->dtype == DType::BF16) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(bf16_to_f32(load_u16le(&raw[2 * i])));
  } else if (t.info->dtype == DType::F32) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(raw[4 * i]) | (static_cast<uint32_t>(raw[4 * i + 1]) << 8) |
                            (static_cast<uint32_t>(raw[4 * i + 2]) << 16) | (static_cast<uint32_t>(raw[4 * i + 3]) << 24);
      out[i] = static_cast<double>(f32_from_bits(bits));
    }
  } else {
    fail("reference: ", name, " is neither BF16 nor F32");
  }
  return out;
}

uint64_t u64(int64_t v) { return static_cast<uint64_t>(v); }

Mat load_mat(const K3Checkpoint& ckpt, const std::string& name, int64_t rows, int64_t cols) {
  return Mat{rows, cols, read_tensor(ckpt, name, {u64(rows), u64(cols)})};
}

Vec load_vec(const K3Checkpoint& ckpt, const std::string& name, int64_t n) {
  return read_tensor(ckpt, name, {u64(n)});
}

std::vector<uint8_t> read_u8(const K3Checkpoint& ckpt, const std::string& name, int64_t rows, int64_t cols) {
  TensorRef t = ckpt.tensor(name);
  if (t.info->dtype != DType::U8 || t.info->shape != std::vector<uint64_t>{u64(rows), u64(cols)})
    fail("reference: ", name, " is not U8 [", rows, ", ", cols, "]");
  std::vector<uint8_t> raw(t.info->bytes());
  t.shard->read(*t.info, raw.data());
  return raw;
}

// ---- The model's weights in double -----------------------------------------

struct KdaWeights {
  Vec A_log, dt_bias, o_norm;
  Mat q_conv, k_conv, v_conv;  // [D, kernel]
  Mat q_proj, k_proj, v_proj, g_proj, f_a_proj, f_b_proj, b_proj, o_proj;
};

struct MlaWeights {
  Mat q_a_proj, q_b_proj, kv_a_proj, kv_b_proj, g_proj, o_proj;
  Vec q_a_norm, kv_a_norm;
};

struct Expert {
  Mat w1, w2, w3;  // w1, w3: [I_moe, d_lat]; w2: [d_lat, I_moe]
};

struct MoeWeights {
  Mat gate;
  Vec correction_bias;
  Mat down_proj, up_proj;  // latent: [d_lat, d], [d, d_lat]
  Vec routed_norm;
  Mat shared_gate, shared_up, shared_down;
  std::vector<Expert> experts;
};

struct LayerWeights {
  LayerKind kind = LayerKind::KDA;
  Vec input_norm, post_attn_norm;
  Vec s_attn, s_mlp;  // w_norm * w_proj for each side
  KdaWeights kda;
  MlaWeights mla;
  Mat dense_gate, dense_up, dense_down;  // layer 0
  MoeWeights moe;
};

struct Model {
  K3Config c;
  Mat embed, lm_head;
  Vec final_norm, s_out;
  std::vector<LayerWeights> layers;
};

Vec elementwise_product(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] * b[i];
  return out;
}

Model load_model(const K3Checkpoint& ckpt) {
  Model m;
  m.c = ckpt.config;
  const K3Config& c = m.c;
  const int64_t d = c.hidden_size, V = c.vocab_size;
  m.embed = load_mat(ckpt, "language_model.model.embed_tokens.weight", V, d);
  m.lm_head = load_mat(ckpt, "language_model.lm_head.weight", V, d);
  m.final_norm = load_vec(ckpt, "language_model.model.norm.weight", d);
  m.s_out = elementwise_product(load_vec(ckpt, "language_model.model.output_attn_res_norm.weight", d),
                                load_mat(ckpt, "language_model.model.output_attn_res_proj.weight", 1, d).v);

  const int64_t D = c.kda_dim(), H = c.kda_num_heads, rf = ckpt.kda_gate_rank, kc = c.short_conv_kernel_size;
  const int64_t Hm = c.num_attention_heads, qk = c.mla_qk_head_dim(), dv = c.v_head_dim;
  const int64_t lat = c.routed_expert_hidden_size, mid = c.moe_intermediate_size;
  const int64_t shared = c.num_shared_experts * c.moe_intermediate_size;

  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    auto N = [&](const std::string& s) { return k3_layer_tensor(i, s); };
    LayerWeights L;
    L.kind = c.layer_kinds[static_cast<size_t>(i)];
    L.input_norm = load_vec(ckpt, N("input_layernorm.weight"), d);
    L.post_attn_norm = load_vec(ckpt, N("post_attention_layernorm.weight"), d);
    L.s_attn = elementwise_product(load_vec(ckpt, N("self_attention_res_norm.weight"), d),
                                   load_mat(ckpt, N("self_attention_res_proj.weight"), 1, d).v);
    L.s_mlp = elementwise_product(load_vec(ckpt, N("mlp_res_norm.weight"), d),
                                  load_mat(ckpt, N("mlp_res_proj.weight"), 1, d).v);
    if (L.kind == LayerKind::KDA) {
      KdaWeights& k = L.kda;
      const int64_t K = c.kda_head_dim;
      k.A_log = load_vec(ckpt, N("self_attn.A_log"), K);
      k.dt_bias = load_vec(ckpt, N("self_attn.dt_bias"), D);
      k.o_norm = load_vec(ckpt, N("self_attn.o_norm.weight"), K);
      auto conv = [&](const char* s) {
        return Mat{D, kc, read_tensor(ckpt, N(cat("self_attn.", s, ".weight")), {u64(D), 1, u64(kc)})};
      };
      k.q_conv = conv("q_conv1d");
      k.k_conv = conv("k_conv1d");
      k.v_conv = conv("v_conv1d");
      k.q_proj = load_mat(ckpt, N("self_attn.q_proj.weight"), D, d);
      k.k_proj = load_mat(ckpt, N("self_attn.k_proj.weight"), D, d);
      k.v_proj = load_mat(ckpt, N("self_attn.v_proj.weight"), D, d);
      k.g_proj = load_mat(ckpt, N("self_attn.g_proj.weight"), D, d);
      k.f_a_proj = load_mat(ckpt, N("self_attn.f_a_proj.weight"), rf, d);
      k.f_b_proj = load_mat(ckpt, N("self_attn.f_b_proj.weight"), D, rf);
      k.b_proj = load_mat(ckpt, N("self_attn.b_proj.weight"), H, d);
      k.o_proj = load_mat(ckpt, N("self_attn.o_proj.weight"), d, D);
    } else {
      MlaWeights& a = L.mla;
      a.q_a_proj = load_mat(ckpt, N("self_attn.q_a_proj.weight"), c.q_lora_rank, d);
      a.q_a_norm = load_vec(ckpt, N("self_attn.q_a_layernorm.weight"), c.q_lora_rank);
      a.q_b_proj = load_mat(ckpt, N("self_attn.q_b_proj.weight"), Hm * qk, c.q_lora_rank);
      a.kv_a_proj = load_mat(ckpt, N("self_attn.kv_a_proj_with_mqa.weight"), c.kv_lora_rank + c.qk_rope_head_dim, d);
      a.kv_a_norm = load_vec(ckpt, N("self_attn.kv_a_layernorm.weight"), c.kv_lora_rank);
      a.kv_b_proj = load_mat(ckpt, N("self_attn.kv_b_proj.weight"), Hm * (c.qk_nope_head_dim + dv), c.kv_lora_rank);
      a.g_proj = load_mat(ckpt, N("self_attn.g_proj.weight"), Hm * dv, d);
      a.o_proj = load_mat(ckpt, N("self_attn.o_proj.weight"), d, Hm * dv);
    }
    if (!c.is_moe_layer(i)) {
      L.dense_gate = load_mat(ckpt, N("mlp.gate_proj.weight"), c.intermediate_size, d);
      L.dense_up = load_mat(ckpt, N("mlp.up_proj.weight"), c.intermediate_size, d);
      L.dense_down = load_mat(ckpt, N("mlp.down_proj.weight"), d, c.intermediate_size);
    } else {
      MoeWeights& e = L.moe;
      e.gate = load_mat(ckpt, N("block_sparse_moe.gate.weight"), c.num_experts, d);
      e.correction_bias = load_vec(ckpt, N("block_sparse_moe.gate.e_score_correction_bias"), c.num_experts);
      e.down_proj = load_mat(ckpt, N("block_sparse_moe.routed_expert_down_proj.weight"), lat, d);
      e.routed_norm = load_vec(ckpt, N("block_sparse_moe.routed_expert_norm.weight"), lat);
      e.up_proj = load_mat(ckpt, N("block_sparse_moe.routed_expert_up_proj.weight"), d, lat);
      e.shared_gate = load_mat(ckpt, N("block_sparse_moe.shared_experts.gate_proj.weight"), shared, d);
      e.shared_up = load_mat(ckpt, N("block_sparse_moe.shared_experts.up_proj.weight"), shared, d);
      e.shared_down = load_mat(ckpt, N("block_sparse_moe.shared_experts.down_proj.weight"), d, shared);
      for (int64_t x = 0; x < c.num_experts; ++x) {
        auto matrix = [&](const char* w, int64_t rows, int64_t cols) {
          const std::vector<uint8_t> packed = read_u8(ckpt, k3_expert_tensor(i, x, w, false), rows, cols / 2);
          const std::vector<uint8_t> scales = read_u8(ckpt, k3_expert_tensor(i, x, w, true), rows, cols / 32);
          return ref::decode_mxfp4(packed.data(), scales.data(), rows, cols);
        };
        e.experts.push_back({matrix("w1", mid, lat), matrix("w2", lat, mid), matrix("w3", mid, lat)});
      }
    }
    m.layers.push_back(std::move(L));
  }
  return m;
}

// ---- Per-sequence state -------------------------------------------------------

struct KdaState {
  std::vector<Vec> q_hist, k_hist, v_hist;  // last kernel-1 raw pre-conv inputs, oldest first
  std::vector<std::vector<double>> S;       // per head, [K, K] indexed [k, v]
};

struct MlaCache {
  std::vector<std::vector<Vec>> k, v;  // [position][head] -> [nope+rope] / [d_v]
};

// ---- Layer bodies ----------------------------------------------------------

Vec slice(const Vec& x, int64_t begin, int64_t n) {
  return Vec(x.begin() + begin, x.begin() + begin + n);
}

Vec kda_forward(const Model& m, const KdaWeights& w, KdaState& st, const Vec& x) {
  const K3Config& c = m.c;
  const int64_t H = c.kda_num_heads, K = c.kda_head_dim;
  // 1-2. projections, short conv + SiLU.
  const Vec q_all = ref::short_conv_silu(st.q_hist, w.q_conv, ref::matvec(w.q_proj, x));
  const Vec k_all = ref::short_conv_silu(st.k_hist, w.k_conv, ref::matvec(w.k_proj, x));
  const Vec v_all = ref::short_conv_silu(st.v_hist, w.v_conv, ref::matvec(w.v_proj, x));
  // 4. beta per head.
  const Vec b = ref::matvec(w.b_proj, x);
  // 5. decay gate r = f_b (f_a x) + dt_bias.
  const Vec f = ref::matvec(w.f_b_proj, ref::matvec(w.f_a_proj, x));
  const Vec gate = ref::matvec(w.g_proj, x);
  // 6. query scale: the spec's constant (float)(K^-0.5), widened exactly.
  const double c_kda = static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(K))));
  Vec o_all(static_cast<size_t>(H * K));
  for (int64_t h = 0; h < H; ++h) {
    // 3. L2 normalise q and k per head.
    Vec q = ref::l2_normalize(slice(q_all, h * K, K));
    const Vec k = ref::l2_normalize(slice(k_all, h * K, K));
    const Vec v = slice(v_all, h * K, K);
    const double beta = ref::sigmoid(b[static_cast<size_t>(h)]);
    Vec g(static_cast<size_t>(K));
    for (int64_t ch = 0; ch < K; ++ch) {
      const double r = f[static_cast<size_t>(h * K + ch)] + w.dt_bias[static_cast<size_t>(h * K + ch)];
      g[static_cast<size_t>(ch)] = c.gate_lower_bound * ref::sigmoid(std::exp(w.A_log[static_cast<size_t>(ch)]) * r);
    }
    for (double& qv : q) qv *= c_kda;
    // 7. recurrence.
    Vec o = ref::kda_head_step(st.S[static_cast<size_t>(h)], q, k, v, beta, g);
    // 8. per-head RMSNorm with o_norm, then the sigmoid output gate.
    o = ref::rms_norm(o, w.o_norm, c.rms_norm_eps);
    for (int64_t ch = 0; ch < K; ++ch)
      o_all[static_cast<size_t>(h * K + ch)] = o[static_cast<size_t>(ch)] * ref::sigmoid(gate[static_cast<size_t>(h * K + ch)]);
  }
  // 9.
  return ref::matvec(w.o_proj, o_all);
}

Vec mla_forward(const Model& m, const MlaWeights& w, MlaCache& cache, const Vec& x) {
  const K3Config& c = m.c;
  const int64_t H = c.num_attention_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim;
  const int64_t qk = nope + rope, dv = c.v_head_dim, rkv = c.kv_lora_rank;
  // 1. q = q_b . RMSNorm(q_a x; q_a_layernorm) -> [H, nope+rope], no rotation.
  const Vec q = ref::matvec(w.q_b_proj, ref::rms_norm(ref::matvec(w.q_a_proj, x), w.q_a_norm, c.rms_norm_eps));
  // 2. c = kv_a x; c_lat, k_r.
  const Vec ckv = ref::matvec(w.kv_a_proj, x);
  const Vec c_lat = slice(ckv, 0, rkv), k_r = slice(ckv, rkv, rope);
  // 3. kv = kv_b . RMSNorm(c_lat; kv_a_layernorm) -> [H, nope+dv].
  const Vec kv = ref::matvec(w.kv_b_proj, ref::rms_norm(c_lat, w.kv_a_norm, c.rms_norm_eps));
  // 4-5. per head k = [k_nope || k_r], v; append to the cache.
  std::vector<Vec> k_row, v_row;
  for (int64_t h = 0; h < H; ++h) {
    Vec k = slice(kv, h * (nope + dv), nope);
    k.insert(k.end(), k_r.begin(), k_r.end());
    k_row.push_back(std::move(k));
    v_row.push_back(slice(kv, h * (nope + dv) + nope, dv));
  }
  cache.k.push_back(std::move(k_row));
  cache.v.push_back(std::move(v_row));
  // 6. causal attention over the cached positions (all <= t: later ones are not
  // in the cache yet), scale (float)((nope+rope)^-0.5) after the dot.
  const double c_mla = static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(qk))));
  const Vec gate = ref::matvec(w.g_proj, x);
  Vec o(static_cast<size_t>(H * dv), 0.0);
  const size_t T = cache.k.size();
  for (int64_t h = 0; h < H; ++h) {
    Vec score(T);
    for (size_t j = 0; j < T; ++j) {
      const Vec& kj = cache.k[j][static_cast<size_t>(h)];
      double dot = 0;
      for (int64_t e = 0; e < qk; ++e) dot += q[static_cast<size_t>(h * qk + e)] * kj[static_cast<size_t>(e)];
      score[j] = dot * c_mla;
    }
    const Vec p = ref::softmax(score);
    for (size_t j = 0; j < T; ++j)
      for (int64_t e = 0; e < dv; ++e)
        o[static_cast<size_t>(h * dv + e)] += p[j] * cache.v[j][static_cast<size_t>(h)][static_cast<size_t>(e)];
  }
  // 7. head-major flatten, sigmoid gate; 8. o_proj.
  for (size_t e = 0; e < o.size(); ++e) o[e] *= ref::sigmoid(gate[e]);
  return ref::matvec(w.o_proj, o);
}

Vec situ_mlp(const Model& m, const Mat& gate_proj, const Mat& up_proj, const Mat& down_proj, const Vec& x) {
  const Vec g = ref::matvec(gate_proj, x), u = ref::matvec(up_proj, x);
  Vec hid(g.size());
  for (size_t i = 0; i < g.size(); ++i) hid[i] = ref::situ(g[i], u[i], m.c.situ_beta, m.c.situ_linear_beta);
  return ref::matvec(down_proj, hid);
}

struct MoeTrace {
  std::vector<int> ids;
  double margin = 0;
};

Vec moe_forward(const Model& m, const MoeWeights& w, const Vec& x, const std::vector<int>* forced, MoeTrace& trace) {
  const K3Config& c = m.c;
  const int64_t E = c.num_experts, k = c.num_experts_per_token;
  // Router: sigma, choice = sigma + correction bias.
  const Vec z = ref::matvec(w.gate, x);
  Vec sigma(z.size()), choice(z.size());
  for (size_t e = 0; e < z.size(); ++e) {
    sigma[e] = ref::sigmoid(z[e]);
    choice[e] = sigma[e] + w.correction_bias[e];
  }
  const ref::Selection own = ref::select_experts(choice, k);
  trace.margin = own.margin;
  trace.ids = own.ids;
  if (forced) {
    if (static_cast<int64_t>(forced->size()) != k) fail("reference: forced route has ", forced->size(), " ids, k = ", k);
    for (size_t i = 0; i < forced->size(); ++i) {
      const int id = (*forced)[i];
      if (id < 0 || id >= E) fail("reference: forced expert id ", id, " out of range");
      if (std::find(forced->begin(), forced->begin() + static_cast<std::ptrdiff_t>(i), id) != forced->begin() + static_cast<std::ptrdiff_t>(i))
        fail("reference: forced expert id ", id, " repeated");
    }
    trace.ids = *forced;
  }
  const Vec weights = ref::route_weights(sigma, trace.ids);
  // Routed path in the latent.
  const Vec z_lat = ref::matvec(w.down_proj, x);
  Vec r(z_lat.size(), 0.0);
  for (size_t i = 0; i < trace.ids.size(); ++i) {
    const Expert& ex = w.experts[static_cast<size_t>(trace.ids[i])];
    const Vec g = ref::matvec(ex.w1, z_lat), u = ref::matvec(ex.w3, z_lat);
    Vec hid(g.size());
    for (size_t j = 0; j < g.size(); ++j) hid[j] = ref::situ(g[j], u[j], c.situ_beta, c.situ_linear_beta);
    const Vec out = ref::matvec(ex.w2, hid);
    for (size_t j = 0; j < r.size(); ++j) r[j] += out[j] * weights[i];
  }
  const Vec routed = ref::matvec(w.up_proj, ref::rms_norm(r, w.routed_norm, c.rms_norm_eps));
  const Vec shared = situ_mlp(m, w.shared_gate, w.shared_up, w.shared_down, x);
  Vec f(routed.size());
  for (size_t j = 0; j < f.size(); ++j) f[j] = routed[j] + shared[j];
  return f;
}

void round_to_float(Vec& x) {
  for (double& v : x) v = static_cast<double>(static_cast<float>(v));
}

double rms(const Vec& x) {
  double ss = 0;
  for (double v : x) ss += v * v;
  return std::sqrt(ss / static_cast<double>(x.size()));
}

}  // namespace

ReferenceResult reference_forward(const K3Checkpoint& ckpt, const std::vector<uint32_t>& tokens,
                                  const ReferenceOptions& opt) {
  const Model m = load_model(ckpt);
  const K3Config& c = m.c;
  const int64_t L = c.num_hidden_layers, T = static_cast<int64_t>(tokens.size());
  const double eps = c.rms_norm_eps;

  if (opt.forced_routes && static_cast<int64_t>(opt.forced_routes->size()) != L)
    fail("reference: forced_routes has ", opt.forced_routes->size(), " layers, the model ", L);

  // Empty state: zero conv windows and recurrent states, empty MLA caches.
  std::vector<KdaState> kda(static_cast<size_t>(L));
  std::vector<MlaCache> mla(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    if (m.layers[static_cast<size_t>(i)].kind != LayerKind::KDA) continue;
    KdaState& s = kda[static_cast<size_t>(i)];
    const Vec zero(static_cast<size_t>(c.kda_dim()), 0.0);
    s.q_hist = s.k_hist = s.v_hist = std::vector<Vec>(static_cast<size_t>(c.short_conv_kernel_size - 1), zero);
    s.S.assign(static_cast<size_t>(c.kda_num_heads),
               std::vector<double>(static_cast<size_t>(c.kda_head_dim * c.kda_head_dim), 0.0));
  }

  ReferenceResult res;
  res.routes.assign(static_cast<size_t>(L), {});
  res.route_margins.assign(static_cast<size_t>(L), {});
  res.hidden_rms.assign(static_cast<size_t>(L), {});
  if (opt.keep_states) {
    res.after_attention.assign(static_cast<size_t>(L), {});
    res.after_layer.assign(static_cast<size_t>(L), {});
  }

  for (int64_t t = 0; t < T; ++t) {
    const uint32_t token = tokens[static_cast<size_t>(t)];
    if (token >= static_cast<uint64_t>(c.vocab_size)) fail("reference: token ", token, " >= vocab ", c.vocab_size);

    ref::LayerWalk walk;
    walk.layers = L;
    walk.block = c.attn_res_block_size;
    walk.mix_attn = [&](int64_t i, const std::vector<Vec>& list) {
      return ref::mix(list, m.layers[static_cast<size_t>(i)].s_attn, eps);
    };
    walk.mix_mlp = [&](int64_t i, const std::vector<Vec>& list) {
      return ref::mix(list, m.layers[static_cast<size_t>(i)].s_mlp, eps);
    };
    walk.mix_out = [&](const std::vector<Vec>& list) { return ref::mix(list, m.s_out, eps); };
    walk.attention = [&](int64_t i, const Vec& x_attn) {
      const LayerWeights& lw = m.layers[static_cast<size_t>(i)];
      const Vec x = ref::rms_norm(x_attn, lw.input_norm, eps);
      return lw.kind == LayerKind::KDA ? kda_forward(m, lw.kda, kda[static_cast<size_t>(i)], x)
                                       : mla_forward(m, lw.mla, mla[static_cast<size_t>(i)], x);
    };
    walk.mlp = [&](int64_t i, const Vec& x_mlp) {
      const LayerWeights& lw = m.layers[static_cast<size_t>(i)];
      const Vec x = ref::rms_norm(x_mlp, lw.post_attn_norm, eps);
      if (!c.is_moe_layer(i)) return situ_mlp(m, lw.dense_gate, lw.dense_up, lw.dense_down, x);
      const std::vector<int>* forced = nullptr;
      if (opt.forced_routes) {
        const auto& per_pos = (*opt.forced_routes)[static_cast<size_t>(i)];
        if (static_cast<int64_t>(per_pos.size()) <= t) fail("reference: forced_routes[", i, "] has no position ", t);
        forced = &per_pos[static_cast<size_t>(t)];
      }
      MoeTrace trace;
      Vec f = moe_forward(m, lw.moe, x, forced, trace);
      res.routes[static_cast<size_t>(i)].push_back(trace.ids);
      res.route_margins[static_cast<size_t>(i)].push_back(trace.margin);
      return f;
    };
    walk.after_layer = [&](int64_t i, Vec& h) {
      if (opt.round_states) round_to_float(h);
      res.hidden_rms[static_cast<size_t>(i)].push_back(rms(h));
      if (opt.keep_states) res.after_layer[static_cast<size_t>(i)].push_back(h);
    };
    walk.after_attention = [&](int64_t i, Vec& p) {
      if (opt.round_states) round_to_float(p);
      if (opt.keep_states) res.after_attention[static_cast<size_t>(i)].push_back(p);
    };

    const Vec embedding = slice(m.embed.v, static_cast<int64_t>(token) * c.hidden_size, c.hidden_size);
    const Vec out = ref::layer_walk(walk, embedding);
    res.logits.push_back(ref::matvec(m.lm_head, ref::rms_norm(out, m.final_norm, eps)));
  }
  return res;
}

}  // namespace deltafin::test
