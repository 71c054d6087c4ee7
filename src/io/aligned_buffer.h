// Page-aligned heap buffers for direct I/O: O_DIRECT needs the buffer, the file
// offset and the length aligned to the device's logical block; 4096 covers
// every drive we target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/weight_memory.h"

namespace deltafin {

constexpr size_t kDirectAlign = 4096;

inline uint64_t round_up_direct(uint64_t n) { return (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }

// Freed with free(): the weight buffers' type (util/weight_memory.h), since
// cache slots and read buffers are weight memory too.
using AlignedBuffer = WeightBuffer;

// `bytes` rounded up to kDirectAlign, aligned to kDirectAlign; throws on failure.
AlignedBuffer make_aligned_buffer(uint64_t bytes);

}  // namespace deltafin
