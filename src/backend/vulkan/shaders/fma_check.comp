#version 460
// The device check of fma() (vulkan_device.cpp): dst = fma(a, b, c) with the
// device's own fma, built with kNativeFma true; the host compares each with
// std::fma to learn whether the device fuses.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  Floats a;
  Floats b;
  Floats c;
  Floats dst;
  uint n;
} p;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  p.dst.v[i] = fma_rn(p.a.v[i], p.b.v[i], p.c.v[i]);
}
