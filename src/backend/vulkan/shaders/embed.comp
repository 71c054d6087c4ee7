#version 460
// out[t] = table row ids[t], BF16 widened or F32 as stored.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  Words table;
  Words ids;
  Floats dst;
  uint n, d, bf16;
} p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (i >= p.n * p.d) return;
  const uint t = i / p.d, c = i % p.d, e = p.ids.v[t] * p.d + c;
  p.dst.v[i] = p.bf16 != 0u ? bf16_at(p.table, e) : uintBitsToFloat(p.table.v[e]);
}
