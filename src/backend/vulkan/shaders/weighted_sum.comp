#version 460
// out[r] = sum over i < k of y[r k + i] * w[r k + i], each product rounded,
// then added from 0 in i order (the routed combine).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  Floats y;
  Floats w;
  Floats dst;
  uint rows, k, d;
} p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (i >= p.rows * p.d) return;
  const uint t = i / p.d, c = i % p.d;
  precise float o = 0.0;
  for (uint j = 0u; j < p.k; ++j) {
    precise float prod = p.y.v[(t * p.k + j) * p.d + c] * p.w.v[t * p.k + j];
    o = o + prod;
  }
  p.dst.v[i] = o;
}
