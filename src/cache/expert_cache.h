// The RAM expert cache (design.md §2, issue 4 §3): a fixed set of slots, each
// one aligned buffer the size of an expert record, allocated once at start so
// no read ever allocates. Slots hold experts that are loading (a read is in
// flight into the buffer) or ready. Eviction takes the unreferenced ready slot
// with the lowest value = last use + a heat bonus (recency weighted by heat);
// pinned slots (the hottest experts, --pin-gb) are never evicted.
//
// Thread-safe: the engine thread acquires/releases; reader threads only call
// finish_load(). Nothing here calls out while holding the lock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/aligned_buffer.h"
#include "store/heat.h"

namespace deltafin {

struct CacheOptions {
  uint64_t record_bytes = 0;   // one expert record
  size_t slots = 0;            // evictable slots (the --cache-gb budget, at least the working set)
  size_t pinned_slots = 0;     // --pin-gb
  size_t prefetch_reserve = 0; // a prefetch never leaves fewer claimable slots than this (demand's share)
  int64_t experts_per_layer = 1;  // key = layer * experts_per_layer + expert
  const HeatHistogram* heat = nullptr;  // read on the engine thread only (acquire), may be null
};

class ExpertCache {
public:
  enum class State { Empty, Loading, Ready, Failed };
  enum class Outcome { Ready, Loading, Claimed, Full };

  struct Claim {
    Outcome outcome = Outcome::Full;
    int slot = -1;
    uint64_t ticket = 0;   // Loading: the read in flight
    bool prefetched = false;  // Loading/Ready: the slot was filled by a prefetch not yet used
    uint64_t version = 0;     // Full: pass to wait_change()
  };

  explicit ExpertCache(const CacheOptions& options);

  // Looks up `key`. Ready or Loading: a demand acquire takes a reference (the
  // slot cannot be evicted until release()). Absent: claims a slot for it —
  // Empty first, else the evictable ready slot of lowest value — and returns
  // Claimed with state Loading; the caller must start a read into data(slot)
  // and call finish_load. Full when nothing can be claimed (or, for a prefetch,
  // when claiming would eat into the demand reserve).
  Claim acquire(int64_t key, bool demand);
  // Like acquire(demand = false) but into a pinned slot.
  Claim acquire_pinned(int64_t key);
  void set_ticket(int slot, uint64_t ticket);
  // The read into `slot` ended: ok -> Ready; otherwise Failed (error kept for
  // a referencing waiter) or Empty when nobody references it.
  void finish_load(int slot, bool ok, const std::string& error);
  void release(int slot);

  // Blocks until one of `slots` is no longer Loading; returns its index in `slots`.
  size_t wait_any(std::span<const int> slots);
  // Blocks until a slot has changed state since the Full claim was made.
  void wait_change(uint64_t version);

  State state(int slot) const;
  std::string error(int slot) const;
  uint8_t* data(int slot) { return slots_[static_cast<size_t>(slot)].buffer.get(); }
  int64_t key(int slot) const;

  // The mean heat per expert, refreshed by the engine once per token (the
  // histogram's total is O(layers * experts) to compute).
  void set_heat_mean(double mean);
  // (key, ticket) of every slot loading by prefetch (to cancel stale ones).
  std::vector<std::pair<int64_t, uint64_t>> loading_prefetches() const;

  size_t slot_count() const { return slots_.size(); }
  size_t pinned_count() const { return pinned_; }
  size_t ready_count() const;
  uint64_t evictions() const;

private:
  struct Slot {
    int64_t key = -1;
    State state = State::Empty;
    int refs = 0;
    bool pinned = false;
    bool prefetched = false;  // filled by a prefetch and not demanded since
    uint64_t last_use = 0;
    uint64_t ticket = 0;
    std::string error;
    AlignedBuffer buffer;
  };

  int find_victim_locked(bool demand) const;
  double value_locked(const Slot& s) const;
  Claim claim_locked(int64_t key, int slot, bool demand);

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Slot> slots_;
  std::unordered_map<int64_t, int> index_;
  const HeatHistogram* heat_ = nullptr;
  int64_t experts_per_layer_ = 1;
  double heat_mean_ = 0;
  size_t pinned_ = 0, reserve_ = 0;
  uint64_t tick_ = 0, evictions_ = 0, version_ = 0;
};

}  // namespace deltafin
