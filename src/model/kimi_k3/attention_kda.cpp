// Kimi Delta Attention (k3-model.md §7.5), ops in the order of steps 1-9. The
// projections run T rows at once; the convolution and the recurrence
// (Backend::kda_recurrence) run position by position, which is what makes a
// T-row pass equal T single steps.
#include <cmath>

#include "model/kimi_k3/model.h"
#include "util/error.h"

namespace deltafin {

void K3Model::attention_kda(int64_t layer, K3Session& s, const Act& x, Act& out) {
  const KdaWeights& w = w_.layers[static_cast<size_t>(layer)].kda;
  KdaState& st = s.kda(layer);
  const size_t T = x.rows(), H = static_cast<size_t>(c_.kda_num_heads), K = static_cast<size_t>(c_.kda_head_dim);
  const size_t D = H * K, rf = w.f_a.rows;

  KdaParams p;
  p.heads = H, p.head_dim = K, p.kernel = static_cast<size_t>(c_.short_conv_kernel_size);
  p.q_conv = w.q_conv, p.k_conv = w.k_conv, p.v_conv = w.v_conv;
  p.a_log = w.a_log, p.dt_bias = w.dt_bias, p.o_norm = w.o_norm;
  p.eps = static_cast<float>(c_.rms_norm_eps);
  p.lower = static_cast<float>(c_.gate_lower_bound);
  // Decision (§7.5): c_kda = (float)(K^-0.5), computed in double, rounded once.
  p.q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(K)));

  Act q = be_.act(T, D), k = be_.act(T, D), v = be_.act(T, D), gate = be_.act(T, D), fa = be_.act(T, rf),
      r = be_.act(T, D), b = be_.act(T, H);
  be_.matmul(w.q.view(), x, q);
  be_.matmul(w.k.view(), x, k);
  be_.matmul(w.v.view(), x, v);
  be_.matmul(w.g.view(), x, gate);
  be_.matmul(w.f_a.view(), x, fa);
  be_.matmul(w.f_b.view(), fa, r);
  be_.matmul(w.b.view(), x, b);

  // Verification keeps what the recurrence consumed (kda_log.h).
  KdaTrace trace;
  if (kda_log_) {
    KdaLayerLog& log = kda_log_->layers[static_cast<size_t>(layer)];
    for (auto* vec : {&log.raw_q, &log.raw_k, &log.raw_v, &log.q, &log.k, &log.v, &log.g}) vec->resize(T * D);
    log.beta.resize(T * H);
    trace = KdaTrace{log.raw_q.data(), log.raw_k.data(), log.raw_v.data(), log.q.data(),
                     log.k.data(),     log.v.data(),     log.g.data(),     log.beta.data()};
  }
  Act o = be_.act(T, D);
  be_.kda_recurrence(q, k, v, gate, r, b, p, KdaLayerState{st.conv_q.data(), st.conv_k.data(), st.conv_v.data(), st.recurrent.data()},
                     kda_log_ ? &trace : nullptr, o);
  be_.matmul(w.o.view(), o, out);
}

void K3Model::replay_kda(K3Session& s, const KdaLog& log, size_t rows) const {
  if (rows > log.rows) fail("replay_kda: ", rows, " rows asked of a log of ", log.rows);
  const size_t H = static_cast<size_t>(c_.kda_num_heads), K = static_cast<size_t>(c_.kda_head_dim);
  for (int64_t layer = 0; layer < c_.num_hidden_layers; ++layer) {
    if (c_.layer_kinds[static_cast<size_t>(layer)] != LayerKind::KDA) continue;
    const KdaWeights& w = w_.layers[static_cast<size_t>(layer)].kda;
    const KdaLayerLog& l = log.layers[static_cast<size_t>(layer)];
    KdaState& st = s.kda(layer);
    KdaParams p;
    p.heads = H, p.head_dim = K, p.kernel = static_cast<size_t>(c_.short_conv_kernel_size);
    p.q_conv = w.q_conv, p.k_conv = w.k_conv, p.v_conv = w.v_conv;
    p.a_log = w.a_log, p.dt_bias = w.dt_bias, p.o_norm = w.o_norm;
    const KdaSteps steps{l.raw_q.data(), l.raw_k.data(), l.raw_v.data(), l.q.data(),
                         l.k.data(),     l.v.data(),     l.g.data(),     l.beta.data()};
    be_.kda_replay(p, KdaLayerState{st.conv_q.data(), st.conv_k.data(), st.conv_v.data(), st.recurrent.data()}, steps,
                   rows);
  }
}

}  // namespace deltafin
