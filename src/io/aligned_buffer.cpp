#include "io/aligned_buffer.h"

#include "util/weight_memory.h"

namespace deltafin {

AlignedBuffer make_aligned_buffer(uint64_t bytes) {
  // Cache slots and read buffers hold expert records that products stream
  // through: huge-page backed where large enough (util/weight_memory.h).
  return alloc_weight_buffer(round_up_direct(bytes == 0 ? 1 : bytes), kDirectAlign);
}

}  // namespace deltafin
