// The size classes of a backend's pool of activation buffers, shared by the
// CPU and Vulkan backends.
#pragma once

#include <bit>
#include <cstddef>

namespace deltafin {

// Slots come in size classes an eighth of a power of two apart (at most
// 12.5 % over what is asked): an acquire takes a free slot of its class and
// never resizes one, so a pass of a shape that ran before finds every
// buffer it needs, whatever order its buffers are taken and given back in.
inline size_t act_size_class(size_t floats) {
  if (floats <= 64) return 64;
  const size_t step = std::bit_floor(floats) / 8;
  return (floats + step - 1) / step * step;
}

}  // namespace deltafin
