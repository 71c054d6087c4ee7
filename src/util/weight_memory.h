// Heap memory for the large weight buffers a decoding step streams through
// (resident expert records, expert-cache slots).
//
// Why huge pages: one decode token of K3 streams 25.8 GB of expert bytes; on
// 4 KiB pages that is 6.3 million TLB misses, and the hardware prefetchers
// stop at every 4 KiB boundary. Buffers of 2 MiB and more are therefore
// aligned to 2 MiB and, where the kernel offers it (Linux's MADV_HUGEPAGE,
// honoured when transparent huge pages are "always" or "madvise"), backed by
// huge pages. Elsewhere, or when the kernel declines, they are ordinary pages:
// only speed differs, never the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace deltafin {

struct WeightMemoryFree {
  void operator()(const uint8_t* p) const;
};
using WeightBuffer = std::unique_ptr<uint8_t[], WeightMemoryFree>;

// The huge-page size these buffers are aligned to when they are at least as large.
constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` (0 is taken as 1) rounded up to a multiple of `align`, aligned to
// `align` (a power of two) or to kHugePageBytes when bytes >= kHugePageBytes;
// throws on failure. Contents are uninitialised.
WeightBuffer alloc_weight_buffer(uint64_t bytes, size_t align);

// A std::allocator for the owned spine matrices (model/common/matrix.h), so
// their storage gets the same huge pages: T is a byte-like type.
template <typename T>
struct WeightAllocator {
  using value_type = T;
  WeightAllocator() = default;
  template <typename U>
  WeightAllocator(const WeightAllocator<U>&) {}
  T* allocate(size_t n) { return reinterpret_cast<T*>(alloc_weight_buffer(n * sizeof(T), 64).release()); }
  void deallocate(T* p, size_t) { WeightMemoryFree{}(reinterpret_cast<const uint8_t*>(p)); }
  template <typename U>
  bool operator==(const WeightAllocator<U>&) const { return true; }
};

// Bytes of a weight tensor held in RAM for the products to stream.
using WeightBytes = std::vector<uint8_t, WeightAllocator<uint8_t>>;

}  // namespace deltafin
