// Kimi Delta Attention (k3-model.md §7.5), ops in the order of steps 1-9. The
// projections run T rows at once; the convolution and the recurrence run
// position by position, which is what makes a T-row pass equal T single steps.
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/portable_math.h"
#include "model/kimi_k3/model.h"
#include "util/error.h"

namespace deltafin {

void K3Model::attention_kda(int64_t layer, K3Session& s, const Rows& x, Rows& out) {
  const KdaWeights& w = w_.layers[static_cast<size_t>(layer)].kda;
  KdaState& st = s.kda(layer);
  const size_t T = x.T, H = static_cast<size_t>(c_.kda_num_heads), K = static_cast<size_t>(c_.kda_head_dim);
  const size_t D = H * K, kernel = static_cast<size_t>(c_.short_conv_kernel_size), rf = w.f_a.rows;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const float lower = static_cast<float>(c_.gate_lower_bound);
  // Decision (§7.5): c_kda = (float)(K^-0.5), computed in double, rounded once.
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(K)));

  Rows q(T, D), k(T, D), v(T, D), gate(T, D), fa(T, rf), r(T, D), b(T, H);
  matmul(w.q.view(), x.v.data(), T, q.v.data(), pool_);
  matmul(w.k.view(), x.v.data(), T, k.v.data(), pool_);
  matmul(w.v.view(), x.v.data(), T, v.v.data(), pool_);
  matmul(w.g.view(), x.v.data(), T, gate.v.data(), pool_);
  matmul(w.f_a.view(), x.v.data(), T, fa.v.data(), pool_);
  matmul(w.f_b.view(), fa.v.data(), T, r.v.data(), pool_);
  matmul(w.b.view(), x.v.data(), T, b.v.data(), pool_);

  std::vector<float> qc(D), kc(D), vc(D), g(D), o(D);
  Rows o_rows(T, D);
  KdaLayerLog* log = nullptr;
  if (kda_log_) {
    log = &kda_log_->layers[static_cast<size_t>(layer)];
    log->raw_q = q.v, log->raw_k = k.v, log->raw_v = v.v;
    for (auto* vec : {&log->q, &log->k, &log->v, &log->g}) vec->resize(T * D);
    log->beta.resize(T * H);
  }
  for (size_t t = 0; t < T; ++t) {
    short_conv_step(q.row(t), w.q_conv.data(), st.conv_q.data(), D, kernel, qc.data());
    short_conv_step(k.row(t), w.k_conv.data(), st.conv_k.data(), D, kernel, kc.data());
    short_conv_step(v.row(t), w.v_conv.data(), st.conv_v.data(), D, kernel, vc.data());
    for (size_t h = 0; h < H; ++h) {
      l2_normalize(qc.data() + h * K, K, 1e-12f);
      l2_normalize(kc.data() + h * K, K, 1e-12f);
    }
    for (size_t i = 0; i < D; ++i) qc[i] = qc[i] * q_scale;
    // Safe decay gate: g = lower * sigmoid(exp(A_log[c]) * (r + dt_bias)); A_log is per key channel, shared by heads.
    for (size_t h = 0; h < H; ++h)
      for (size_t c = 0; c < K; ++c) {
        const size_t i = h * K + c;
        const float rr = r.row(t)[i] + w.dt_bias[i];
        g[i] = lower * sigmoid(portable_expf(w.a_log[c]) * rr);
      }
    if (log) {
      std::copy(qc.begin(), qc.end(), log->q.begin() + t * D);
      std::copy(kc.begin(), kc.end(), log->k.begin() + t * D);
      std::copy(vc.begin(), vc.end(), log->v.begin() + t * D);
      std::copy(g.begin(), g.end(), log->g.begin() + t * D);
    }
    for (size_t h = 0; h < H; ++h) {
      const float beta = sigmoid(b.row(t)[h]);
      if (log) log->beta[t * H + h] = beta;
      float* oh = o.data() + h * K;
      kda_step(st.recurrent.data() + h * K * K, qc.data() + h * K, kc.data() + h * K, vc.data() + h * K,
               g.data() + h * K, beta, K, K, oh);
      rmsnorm(oh, w.o_norm.data(), K, eps, oh);
      for (size_t c = 0; c < K; ++c) oh[c] = oh[c] * sigmoid(gate.row(t)[h * K + c]);
    }
    std::copy(o.begin(), o.end(), o_rows.row(t));
  }
  matmul(w.o.view(), o_rows.v.data(), T, out.v.data(), pool_);
}

void K3Model::replay_kda(K3Session& s, const KdaLog& log, size_t rows) const {
  if (rows > log.rows) fail("replay_kda: ", rows, " rows asked of a log of ", log.rows);
  const size_t H = static_cast<size_t>(c_.kda_num_heads), K = static_cast<size_t>(c_.kda_head_dim);
  const size_t D = H * K, kernel = static_cast<size_t>(c_.short_conv_kernel_size);
  std::vector<float> scratch(D);
  for (int64_t layer = 0; layer < c_.num_hidden_layers; ++layer) {
    if (c_.layer_kinds[static_cast<size_t>(layer)] != LayerKind::KDA) continue;
    const KdaWeights& w = w_.layers[static_cast<size_t>(layer)].kda;
    const KdaLayerLog& l = log.layers[static_cast<size_t>(layer)];
    KdaState& st = s.kda(layer);
    for (size_t t = 0; t < rows; ++t) {
      // The convolution's outputs are already in the log; only its window moves.
      short_conv_step(l.raw_q.data() + t * D, w.q_conv.data(), st.conv_q.data(), D, kernel, scratch.data());
      short_conv_step(l.raw_k.data() + t * D, w.k_conv.data(), st.conv_k.data(), D, kernel, scratch.data());
      short_conv_step(l.raw_v.data() + t * D, w.v_conv.data(), st.conv_v.data(), D, kernel, scratch.data());
      for (size_t h = 0; h < H; ++h) {
        const size_t at = t * D + h * K;
        kda_step(st.recurrent.data() + h * K * K, l.q.data() + at, l.k.data() + at, l.v.data() + at,
                 l.g.data() + at, l.beta[t * H + h], K, K, scratch.data());
      }
    }
  }
}

}  // namespace deltafin
