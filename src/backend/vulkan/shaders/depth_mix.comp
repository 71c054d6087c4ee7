#version 460
// K3's AttnRes mix over depth (backend.h depth_mix), one workgroup of 32
// lanes per row: per value j, r = rmsnorm scale of v_j (no weight), alpha_j =
// canonical dot(v_j * r, s); alpha = softmax(alpha); out = sum_j alpha_j v_j
// from 0 in ascending j, each product rounded, then added.
#include "common.glsl"
layout(local_size_x = 32) in;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Values { Floats v[]; };
layout(push_constant) uniform P {
  Values values;
  Floats s;
  Floats dst;
  Doubles dtab;
  uint n_values, rows, d;
  float eps;
} p;
const uint kMaxValues = 256;
shared float alpha[kMaxValues];
shared float sh[32];
shared float scale;

// The canonical reduction of the 32 lanes' accumulators, by lane 0.
float tree_of(float mine) {
  sh[gl_LocalInvocationID.x] = mine;
  barrier();
  float a[32];
  for (uint l = 0u; l < 32u; ++l) a[l] = sh[l];
  const float r = lane_tree(a);
  barrier();
  return r;
}

void main() {
  const uint t = group_index();
  if (t >= p.rows) return;
  const uint lane = gl_LocalInvocationID.x, o = t * p.d;
  for (uint j = 0u; j < p.n_values; ++j) {
    Floats v = p.values.v[j];
    precise float acc = 0.0;
    for (uint i = lane; i < p.d; i += 32u) acc = fma_rn(v.v[o + i], v.v[o + i], acc);
    const float dot_vv = tree_of(acc);
    if (lane == 0u) {
      precise float s = div_rn(dot_vv, float(p.d)) + p.eps;
      scale = div_rn(1.0, sqrt_rn(s));
    }
    barrier();
    const float r = scale;
    precise float acc2 = 0.0;
    for (uint i = lane; i < p.d; i += 32u) {
      precise float key = v.v[o + i] * r;
      acc2 = fma_rn(key, p.s.v[i], acc2);
    }
    const float a = tree_of(acc2);
    if (lane == 0u) alpha[j] = a;
  }
  barrier();
  if (lane == 0u) {  // kernels/ops.cpp softmax, with the canonical sum
    float m = alpha[0];
    for (uint j = 1u; j < p.n_values; ++j) m = alpha[j] > m ? alpha[j] : m;
    precise float acc[32];
    for (uint l = 0u; l < 32u; ++l) acc[l] = 0.0;
    for (uint j = 0u; j < p.n_values; ++j) {
      precise float x = alpha[j] - m;
      alpha[j] = portable_expf(p.dtab, x);
      acc[j % 32u] = acc[j % 32u] + alpha[j];
    }
    const float total = lane_tree(acc);
    for (uint j = 0u; j < p.n_values; ++j) alpha[j] = div_rn(alpha[j], total);
  }
  barrier();
  for (uint i = lane; i < p.d; i += 32u) {
    precise float sum = 0.0;
    for (uint j = 0u; j < p.n_values; ++j) {
      precise float prod = alpha[j] * p.values.v[j].v[o + i];
      sum = sum + prod;
    }
    p.dst.v[o + i] = sum;
  }
}
