#version 460
// Elementwise ops, one thread per element (kernels/ops.cpp, cpu_backend.cpp).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  Floats a;    // x (add, mul_sigmoid), g (gates), src (round_bf16)
  Floats b;    // d (add), g (mul_sigmoid), u (gates)
  Floats dst;  // x (add, mul_sigmoid), h (gates), dst (round_bf16)
  Doubles dtab;
  uint op;     // 0 add, 1 mul_sigmoid, 2 round_bf16, 3 silu(a) * b, 4 situ(a, b)
  uint n;      // elements (round_bf16: rows x src_width)
  uint src_width, dst_width, dst_col;  // round_bf16
  float beta, beta_lin;                // situ
} p;

uint round_to_bf16(uint u) {  // util/numeric.h f32_to_bf16
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (i >= p.n) return;
  if (p.op == 0u) {
    precise float r = p.a.v[i] + p.b.v[i];
    p.dst.v[i] = r;
  } else if (p.op == 1u) {
    precise float r = p.a.v[i] * sigmoid_f(p.dtab, p.b.v[i]);
    p.dst.v[i] = r;
  } else if (p.op == 2u) {
    const uint t = i / p.src_width, c = i % p.src_width;
    p.dst.v[t * p.dst_width + p.dst_col + c] = uintBitsToFloat(round_to_bf16(floatBitsToUint(p.a.v[i])) << 16);
  } else if (p.op == 3u) {
    precise float r = silu_f(p.dtab, p.a.v[i]) * p.b.v[i];
    p.dst.v[i] = r;
  } else {
    p.dst.v[i] = situ_f(p.dtab, p.a.v[i], p.b.v[i], p.beta, p.beta_lin);
  }
}
