#version 460
// rmsnorm of vectors of n floats (kernels/ops.cpp rmsnorm): one workgroup of
// 32 lanes per vector; var = canonical dot(x, x) / n, r = 1 / sqrt(var + eps),
// out = w * (x * r) (or x * r without weights). Rows, heads of rows (QK-norm)
// and the latent part of MLA rows are vectors at a stride.
#include "common.glsl"
layout(local_size_x = 32) in;
layout(push_constant) uniform P {
  Floats x;
  Floats w;  // n weights, or none (has_w 0)
  Floats y;  // may be x
  uint vectors, n, x_stride, y_stride, has_w;
  float eps;
} p;
shared float sh[32];
shared float scale;

void main() {
  const uint v = group_index();
  if (v >= p.vectors) return;
  const uint lane = gl_LocalInvocationID.x;
  const uint xo = v * p.x_stride, yo = v * p.y_stride;
  precise float acc = 0.0;
  for (uint i = lane; i < p.n; i += 32u) acc = fma_rn(p.x.v[xo + i], p.x.v[xo + i], acc);
  sh[lane] = acc;
  barrier();
  if (lane == 0u) {
    float a[32];
    for (uint l = 0u; l < 32u; ++l) a[l] = sh[l];
    const float var = div_rn(lane_tree(a), float(p.n));
    precise float s = var + p.eps;
    scale = div_rn(1.0, sqrt_rn(s));
  }
  barrier();
  const float r = scale;
  for (uint i = lane; i < p.n; i += 32u) {
    precise float o = p.x.v[xo + i] * r;
    if (p.has_w != 0u) o = p.w.v[i] * o;
    p.y.v[yo + i] = o;
  }
}
