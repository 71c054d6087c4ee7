#version 460
// RoPE in place, one thread per head of a row (cpu_backend.cpp rope_head):
// rotate-half pairs (i, i + half), or interleaved pairs (2i, 2i + 1)
// de-interleaved first and rotated into the halves (DeepSeek's MLA).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  Floats x;
  Floats cos_;  // [rows, half]
  Floats sin_;
  uint rows, width, head_dim, interleaved;
} p;

void main() {
  const uint heads = p.width / p.head_dim;
  const uint item = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (item >= p.rows * heads) return;
  const uint t = item / heads, base = t * p.width + (item % heads) * p.head_dim, half_ = p.head_dim / 2u;
  float tmp[512];
  for (uint i = 0u; i < p.head_dim; ++i) tmp[i] = p.x.v[base + i];
  for (uint i = 0u; i < half_; ++i) {
    const float lo = p.interleaved != 0u ? tmp[2u * i] : tmp[i];
    const float hi = p.interleaved != 0u ? tmp[2u * i + 1u] : tmp[i + half_];
    const float c = p.cos_.v[t * half_ + i], s = p.sin_.v[t * half_ + i];
    precise float out_lo = lo * c - hi * s;
    precise float out_hi = hi * c + lo * s;
    p.x.v[base + i] = out_lo;
    p.x.v[base + i + half_] = out_hi;
  }
}
