#include "io/aligned_buffer.h"

#include <cstdlib>
#include <new>

#include "util/error.h"

namespace deltafin {

void AlignedFree::operator()(uint8_t* p) const { std::free(p); }

AlignedBuffer make_aligned_buffer(uint64_t bytes) {
  void* p = nullptr;
  const uint64_t n = round_up_direct(bytes == 0 ? 1 : bytes);
  if (posix_memalign(&p, kDirectAlign, n) != 0) fail("out of memory allocating an aligned buffer of ", n, " bytes");
  return AlignedBuffer(static_cast<uint8_t*>(p));
}

}  // namespace deltafin
