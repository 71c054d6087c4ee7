#include "support/allocation_count.h"

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DELTAFIN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DELTAFIN_ASAN 1
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
}  // namespace

#ifndef DELTAFIN_ASAN
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace deltafin::test {

#ifdef DELTAFIN_ASAN
bool counts_allocations() { return false; }
#else
bool counts_allocations() { return true; }
#endif

void begin_allocation_count() {
  g_allocations = 0;
  g_counting = true;
}

uint64_t end_allocation_count() {
  g_counting = false;
  return g_allocations.load();
}

}  // namespace deltafin::test
