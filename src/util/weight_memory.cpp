#include "util/weight_memory.h"

#include <sys/mman.h>

#include <cstdlib>

#include "util/error.h"

namespace deltafin {

void WeightMemoryFree::operator()(const uint8_t* p) const { std::free(const_cast<uint8_t*>(p)); }

WeightBuffer alloc_weight_buffer(uint64_t bytes, size_t align) {
  const uint64_t want = bytes == 0 ? 1 : bytes;
  const bool huge = want >= kHugePageBytes;
  const size_t a = huge && align < kHugePageBytes ? kHugePageBytes : align;
  const uint64_t n = (want + align - 1) / align * align;
  void* p = nullptr;
  if (posix_memalign(&p, a, n) != 0) fail("out of memory allocating a buffer of ", n, " bytes");
#if defined(MADV_HUGEPAGE)
  // A hint: refused (no THP in this kernel) it changes nothing but speed.
  if (huge) (void)::madvise(p, n / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
#endif
  return WeightBuffer(static_cast<uint8_t*>(p));
}

}  // namespace deltafin
