#version 460
// Causal attention of one (row, query head) per workgroup of 32 lanes
// (kernels/ops.cpp attention): score_j = canonical dot(q, key_j) * scale for
// the n = start + t + 1 positions, softmax (max, portable expf, canonical
// sum, division), then out = sum_j p_j value_j from 0 in ascending j, each
// product rounded then added. Grouped-query heads read kv head h / group;
// latent (MLA) attention is the case of one shared key/value row per
// position whose first dv floats are the value.
#include "common.glsl"
layout(local_size_x = 32) in;
layout(push_constant) uniform P {
  Floats q;
  Floats keys;     // position j of kv head g at j * key_stride + g * head_offset
  Floats values;
  Floats dst;
  Floats scores;   // scratch: items x n_max
  Doubles dtab;
  uint T, H, group, dk, dv;
  uint key_stride, value_stride, head_offset;
  uint start, t0, n_max;
  float scale;
} p;
shared float sh[32];

void main() {
  const uint item = group_index();
  if (item >= p.T * p.H) return;
  const uint lane = gl_LocalInvocationID.x;
  const uint t = p.t0 + item / p.H, h = item % p.H, g = h / p.group;
  const uint n = p.start + t + 1u;
  const uint qo = (t * p.H + h) * p.dk, so = item * p.n_max;
  const uint ko = g * p.head_offset;
  for (uint j = lane; j < n; j += 32u) {
    precise float acc[32];
    for (uint l = 0u; l < 32u; ++l) acc[l] = 0.0;
    for (uint i = 0u; i < p.dk; ++i)
      acc[i % 32u] = fma_rn(p.q.v[qo + i], p.keys.v[j * p.key_stride + ko + i], acc[i % 32u]);
    precise float s = lane_tree(acc) * p.scale;
    p.scores.v[so + j] = s;
  }
  memoryBarrierBuffer();
  barrier();
  float m = p.scores.v[so + lane % n];
  for (uint j = lane; j < n; j += 32u) m = p.scores.v[so + j] > m ? p.scores.v[so + j] : m;
  sh[lane] = m;
  barrier();
  m = sh[0];
  for (uint l = 1u; l < 32u; ++l) m = sh[l] > m ? sh[l] : m;
  barrier();
  precise float acc = 0.0;
  for (uint j = lane; j < n; j += 32u) {
    precise float x = p.scores.v[so + j] - m;
    const float e = portable_expf(p.dtab, x);
    p.scores.v[so + j] = e;
    acc = acc + e;
  }
  sh[lane] = acc;
  memoryBarrierBuffer();
  barrier();
  float a[32];
  for (uint l = 0u; l < 32u; ++l) a[l] = sh[l];
  const float total = lane_tree(a);
  for (uint j = lane; j < n; j += 32u) p.scores.v[so + j] = div_rn(p.scores.v[so + j], total);
  memoryBarrierBuffer();
  barrier();
  const uint oo = (t * p.H + h) * p.dv;
  for (uint i = lane; i < p.dv; i += 32u) {
    precise float o = 0.0;
    for (uint j = 0u; j < n; ++j) {
      precise float prod = p.scores.v[so + j] * p.values.v[j * p.value_stride + ko + i];
      o = o + prod;
    }
    p.dst.v[oo + i] = o;
  }
}
