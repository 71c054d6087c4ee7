#include "io/aligned_buffer.h"

#include <cstdlib>
#include <new>

#include "util/weight_memory.h"

namespace deltafin {

void AlignedFree::operator()(uint8_t* p) const { std::free(p); }

AlignedBuffer make_aligned_buffer(uint64_t bytes) {
  // Cache slots and read buffers hold expert records that products stream
  // through: huge-page backed where large enough (util/weight_memory.h).
  return AlignedBuffer(alloc_weight_buffer(round_up_direct(bytes == 0 ? 1 : bytes), kDirectAlign).release());
}

}  // namespace deltafin
