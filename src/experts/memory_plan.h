// Where a streamed run's RAM goes: the spine, the expert cache (whole slots of
// one record each), the pinned tier, and the per-session state. The cache
// never has fewer slots than the working set (one layer's demand reads plus
// one layer's prefetch), so "--cache-gb 0" still runs, with that much RAM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace deltafin {

struct MemoryPlan {
  uint64_t spine_bytes = 0;
  uint64_t slot_bytes = 0;          // one expert record, rounded up to 4 KiB
  size_t cache_slots = 0, pinned_slots = 0, working_slots = 0;
  uint64_t expert_bank_bytes = 0;   // all routed experts of the store
  uint64_t ram_available = 0;       // available_ram_bytes()
  bool cache_auto = false;
  uint64_t cache_bytes() const { return cache_slots * slot_bytes; }
  uint64_t pinned_bytes() const { return pinned_slots * slot_bytes; }
};

// Bytes of RAM this process may use: what the system has available (Linux's
// MemAvailable; platform/memory.h says what other systems count), or the
// cgroup memory limit when lower.
uint64_t available_ram_bytes();

MemoryPlan plan_memory(uint64_t spine_bytes, uint64_t record_bytes, uint64_t expert_count, int64_t experts_per_token,
                       std::optional<double> cache_gb, double pin_gb, bool lookahead);

// Peak and current resident set of this process, bytes (Linux: VmHWM and
// VmRSS; platform/memory.h).
uint64_t peak_rss_bytes();
uint64_t current_rss_bytes();

}  // namespace deltafin
