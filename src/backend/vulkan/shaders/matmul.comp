#version 460
// y = x W^T (kernels/matmul.h): one workgroup of 32 lanes per weight row and
// up to 8 x rows. Lane l accumulates the columns c = l (mod 32) in ascending
// order with fma, exactly as the CPU's lane l does; the lanes then meet in
// the fixed tree. Weights are decoded from their stored bytes per use.
#include "common.glsl"
layout(local_size_x = 32) in;
layout(push_constant) uniform P {
  Words w;       // the stored data
  Words scales;  // the stored scales (type-dependent)
  Floats x;
  Floats y;
  Floats ftab;
  uint type;     // WeightType: 0 F32, 1 BF16, 2 Int8Row, 3 MXFP4, 4 FP8Block, 5 Int4Group32
  uint rows, cols, T;
} p;
const uint TT = 8;
shared float sh[TT * 32];

float weight(uint r, uint c) {
  const uint e = r * p.cols + c;
  if (p.type == 0u) return uintBitsToFloat(p.w.v[e]);
  if (p.type == 1u) return bf16_at(p.w, e);
  if (p.type == 2u) return float(int(byte_at(p.w, e) << 24) >> 24);
  if (p.type == 3u) {
    const uint b = byte_at(p.w, e >> 1);
    const uint nib = (e & 1u) == 0u ? (b & 15u) : (b >> 4);
    precise float v = p.ftab.v[kTabE2M1 + nib] * p.ftab.v[kTabE8M0 + byte_at(p.scales, e >> 5)];
    return v;
  }
  if (p.type == 4u) {
    const uint blocks = (p.cols + 127u) / 128u;
    const float s = uintBitsToFloat(p.scales.v[(r / 128u) * blocks + c / 128u]);
    precise float v = p.ftab.v[kTabE4M3 + byte_at(p.w, e)] * s;
    return v;
  }
  const uint nib = (p.w.v[e >> 3] >> (4u * (e & 7u))) & 15u;
  precise float v = p.ftab.v[kTabInt4 + nib] * bf16_at(p.scales, e >> 5);
  return v;
}

void main() {
  const uint r = group_index();
  if (r >= p.rows) return;  // uniform over the workgroup
  const uint t0 = gl_WorkGroupID.z * TT;
  const uint nt = min(TT, p.T - t0);
  const uint lane = gl_LocalInvocationID.x;
  precise float acc[TT];
  for (uint i = 0u; i < TT; ++i) acc[i] = 0.0;
  for (uint c = lane; c < p.cols; c += 32u) {
    const float wv = weight(r, c);
    for (uint i = 0u; i < nt; ++i) acc[i] = fma_rn(wv, p.x.v[(t0 + i) * p.cols + c], acc[i]);
  }
  for (uint i = 0u; i < nt; ++i) sh[i * 32u + lane] = acc[i];
  barrier();
  if (lane < nt) {
    float a[32];
    for (uint l = 0u; l < 32u; ++l) a[l] = sh[lane * 32u + l];
    precise float d = lane_tree(a);
    if (p.type == 2u) d = d * unpackHalf2x16(bf16_bits_at(p.scales, r)).x;
    p.y.v[(t0 + lane) * p.rows + r] = d;
  }
}
