// Weight buffers: aligned as promised, writable end to end, and on Linux with
// transparent huge pages available, backed by them where large enough.
#include "util/weight_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

using namespace deltafin;

namespace {

// "[madvise]" or "[always]" in the kernel's THP setting, or "" where there is none.
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  for (const char* mode : {"[always]", "[madvise]", "[never]"})
    if (line.find(mode) != std::string::npos) return mode;
  return "";
}

// AnonHugePages (kB) of the mapping that holds p, from /proc/self/smaps.
long huge_kb_at(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

// A counter of /proc/vmstat (0 where absent).
long vmstat(const std::string& name) {
  std::ifstream in("/proc/vmstat");
  std::string key;
  long value = 0;
  while (in >> key >> value)
    if (key == name) return value;
  return 0;
}

}  // namespace

TEST(WeightMemory, SmallBuffersTakeTheAskedAlignment) {
  for (size_t align : {size_t{64}, size_t{4096}}) {
    WeightBuffer b = alloc_weight_buffer(1000, align);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % align, 0u);
    std::memset(b.get(), 0xAB, 1000);
    EXPECT_EQ(b[999], 0xAB);
  }
  WeightBuffer empty = alloc_weight_buffer(0, 64);
  EXPECT_NE(empty, nullptr);
}

TEST(WeightMemory, LargeBuffersAreHugePageAligned) {
  const size_t bytes = 17547264;  // one K3 expert record
  const long fallbacks_before = vmstat("thp_fault_fallback");
  WeightBuffer b = alloc_weight_buffer(bytes, 4096);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % kHugePageBytes, 0u);
  std::memset(b.get(), 1, bytes);
  EXPECT_EQ(b[bytes - 1], 1);
#if defined(__linux__)
  // Where the kernel honours MADV_HUGEPAGE, the touched buffer is (at least
  // partly) huge pages. A fragmented memory may make the kernel fall back to
  // small pages, which it counts: then there is nothing to check.
  const std::string mode = thp_mode();
  if (mode != "[madvise]" && mode != "[always]") GTEST_SKIP() << "no transparent huge pages here";
  const long huge_kb = huge_kb_at(b.get());
  if (huge_kb <= 0 && vmstat("thp_fault_fallback") > fallbacks_before)
    GTEST_SKIP() << "the kernel fell back to small pages (memory fragmented)";
  EXPECT_GT(huge_kb, 0) << "THP " << mode;
#endif
}
