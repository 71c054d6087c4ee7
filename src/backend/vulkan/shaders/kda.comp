#version 460
// K3's KDA recurrence (backend.h kda_recurrence; cpu_backend.cpp), one
// workgroup per head, row after row: the head's short convolutions, the
// l2 norms, the decay gate, the delta-rule step (kernels/ops.cpp kda_step,
// kernels/ops_scalar.cpp kda_core: thread j owns column j of the state), the
// output norm and gate. The dot products run on lane 0 in the canonical
// order (a head is at most a few hundred floats).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  Floats in_;     // q, k, v, gate, r: five [T, D] blocks; then b [T, H]
  Floats params;  // q_conv, k_conv, v_conv [D, kernel]; a_log [K]; dt_bias [D]; o_norm [K]
  Floats state;   // conv_q, conv_k, conv_v [D, kernel]; recurrent [H, K, K]
  Floats trace;   // q, k, v, g [T, D]; beta [T, H]
  Floats dst;     // o [T, D]
  Doubles dtab;
  uint T, H, K, kernel, has_trace;
  float eps, lower, q_scale;
} p;
const uint kMaxK = 256;
shared float qc[kMaxK], kc[kMaxK], vc[kMaxK], g[kMaxK], o[kMaxK], decay[kMaxK], bk[kMaxK];
shared float value;

float dot_lane0(uint which) {  // canonical dot of a shared vector with itself
  precise float acc[32];
  for (uint l = 0u; l < 32u; ++l) acc[l] = 0.0;
  for (uint i = 0u; i < p.K; ++i) {
    const float x = which == 0u ? qc[i] : which == 1u ? kc[i] : o[i];
    acc[i % 32u] = fma_rn(x, x, acc[i % 32u]);
  }
  return lane_tree(acc);
}

// kernels/ops.cpp short_conv_step for one channel: the window shifts, the
// input lands last, acc = w0 s0 + w1 s1 + ... (rounded products, in order).
float conv(uint block, uint ch, float x) {
  const uint D = p.H * p.K;
  const uint so = block * D * p.kernel + ch * p.kernel;
  for (uint j = 0u; j + 1u < p.kernel; ++j) p.state.v[so + j] = p.state.v[so + j + 1u];
  p.state.v[so + p.kernel - 1u] = x;
  precise float acc = p.params.v[so] * p.state.v[so];
  for (uint j = 1u; j < p.kernel; ++j) {
    precise float prod = p.params.v[so + j] * p.state.v[so + j];
    acc = acc + prod;
  }
  return silu_f(p.dtab, acc);
}

void main() {
  const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint K = p.K, D = p.H * K;
  const uint a_log = 3u * D * p.kernel, dt_bias = a_log + K, o_norm = dt_bias + D;
  const uint rec = 3u * D * p.kernel + h * K * K;
  for (uint t = 0u; t < p.T; ++t) {
    const uint row = t * D + h * K;
    for (uint c = tid; c < K; c += 64u) {
      qc[c] = conv(0u, h * K + c, p.in_.v[0u * p.T * D + row + c]);
      kc[c] = conv(1u, h * K + c, p.in_.v[1u * p.T * D + row + c]);
      vc[c] = conv(2u, h * K + c, p.in_.v[2u * p.T * D + row + c]);
    }
    barrier();
    // l2_normalize (floor 1e-12) of qc, then kc: x / max(sqrt(dot(x, x)), floor).
    for (uint which = 0u; which < 2u; ++which) {
      if (tid == 0u) {
        const float norm = sqrt_rn(dot_lane0(which));
        value = norm > 1e-12 ? norm : 1e-12;
      }
      barrier();
      for (uint c = tid; c < K; c += 64u) {
        if (which == 0u) qc[c] = div_rn(qc[c], value);
        else kc[c] = div_rn(kc[c], value);
      }
      barrier();
    }
    for (uint c = tid; c < K; c += 64u) {
      precise float qs = qc[c] * p.q_scale;
      qc[c] = qs;
      precise float rr = p.in_.v[4u * p.T * D + row + c] + p.params.v[dt_bias + h * K + c];
      precise float arg = portable_expf(p.dtab, p.params.v[a_log + c]) * rr;
      precise float gg = p.lower * sigmoid_f(p.dtab, arg);
      g[c] = gg;
    }
    barrier();
    const float beta = sigmoid_f(p.dtab, p.in_.v[5u * p.T * D + t * p.H + h]);
    if (p.has_trace != 0u) {
      for (uint c = tid; c < K; c += 64u) {
        p.trace.v[0u * p.T * D + row + c] = qc[c];
        p.trace.v[1u * p.T * D + row + c] = kc[c];
        p.trace.v[2u * p.T * D + row + c] = vc[c];
        p.trace.v[3u * p.T * D + row + c] = g[c];
      }
      if (tid == 0u) p.trace.v[4u * p.T * D + t * p.H + h] = beta;
    }
    // kda_step: decay = expf(g), bk = beta k (rounded), then kda_core.
    for (uint c = tid; c < K; c += 64u) {
      decay[c] = portable_expf(p.dtab, g[c]);
      precise float b = beta * kc[c];
      bk[c] = b;
    }
    barrier();
    for (uint j = tid; j < K; j += 64u) {
      precise float acc = 0.0;
      for (uint r = 0u; r < K; ++r) {
        precise float s = p.state.v[rec + r * K + j] * decay[r];
        p.state.v[rec + r * K + j] = s;
        precise float prod = kc[r] * s;
        acc = acc + prod;
      }
      precise float delta = vc[j] - acc;
      precise float out_j = 0.0;
      for (uint r = 0u; r < K; ++r) {
        precise float upd = bk[r] * delta;
        precise float s = p.state.v[rec + r * K + j] + upd;
        p.state.v[rec + r * K + j] = s;
        precise float prod = qc[r] * s;
        out_j = out_j + prod;
      }
      o[j] = out_j;
    }
    barrier();
    // rmsnorm(o, o_norm, eps), then o *= sigmoid(gate).
    if (tid == 0u) {
      const float var = div_rn(dot_lane0(2u), float(K));
      precise float s = var + p.eps;
      value = div_rn(1.0, sqrt_rn(s));
    }
    barrier();
    for (uint c = tid; c < K; c += 64u) {
      precise float x = o[c] * value;
      precise float normed = p.params.v[o_norm + c] * x;
      precise float gated = normed * sigmoid_f(p.dtab, p.in_.v[3u * p.T * D + row + c]);
      p.dst.v[row + c] = gated;
    }
    barrier();
  }
}
