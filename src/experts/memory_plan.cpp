#include "experts/memory_plan.h"

#include <algorithm>

#include "io/aligned_buffer.h"
#include "platform/memory.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin {

uint64_t available_ram_bytes() {
  uint64_t avail = platform::available_memory_bytes();
  // A memory cgroup caps us below what the machine has free.
  const uint64_t lim = platform::memory_limit_bytes();
  if (lim > 0 && lim < avail) avail = lim;
  return avail;
}

uint64_t peak_rss_bytes() { return platform::peak_rss_bytes(); }
uint64_t current_rss_bytes() { return platform::current_rss_bytes(); }

MemoryPlan plan_memory(uint64_t spine_bytes, uint64_t record_bytes, uint64_t expert_count, int64_t k,
                       std::optional<double> cache_gb, double pin_gb, bool lookahead) {
  MemoryPlan p;
  p.spine_bytes = spine_bytes;
  p.slot_bytes = round_up_direct(record_bytes);
  p.expert_bank_bytes = record_bytes * expert_count;
  p.ram_available = available_ram_bytes();
  p.working_slots = static_cast<size_t>(lookahead ? 2 * k : k);
  if (cache_gb && *cache_gb < 0) fail("--cache-gb must be >= 0, got ", *cache_gb);
  if (pin_gb < 0) fail("--pin-gb must be >= 0, got ", pin_gb);
  uint64_t cache_bytes = 0;
  if (cache_gb) {
    cache_bytes = static_cast<uint64_t>(*cache_gb * 1e9);
  } else {
    // Auto: 70 % of what is left after the spine, leaving room for the
    // session state, the page tables and everyone else.
    p.cache_auto = true;
    const uint64_t left = p.ram_available > spine_bytes ? p.ram_available - spine_bytes : 0;
    cache_bytes = left / 10 * 7;
  }
  const size_t bank_slots = static_cast<size_t>(expert_count);
  p.cache_slots = std::max<size_t>(p.working_slots, std::min<size_t>(bank_slots, cache_bytes / p.slot_bytes));
  p.pinned_slots = std::min<size_t>(bank_slots, static_cast<size_t>(pin_gb * 1e9) / p.slot_bytes);
  return p;
}

}  // namespace deltafin
