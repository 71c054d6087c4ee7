// The RAM expert cache (design.md §2, issue 4 §3): a fixed set of slots, each
// one aligned buffer the size of an expert record, allocated once at start so
// no read ever allocates. Slots hold experts that are loading (a read is in
// flight into the buffer) or ready. Pinned slots (the hottest experts,
// --pin-gb) are never evicted.
//
// Which ready expert makes room for a missed one is its policy's choice
// (experts/cache_policy.h, --cache-policy); the cache itself takes an empty
// slot first (the one emptied longest ago) and never offers a pinned,
// referenced or loading slot, nor, to a prefetch, a prefetch not used yet.
// The default, cycle-heat, is recency weighted by heat, where recency is
// measured in the layer cycle. A forward pass visits the MoE layers in order,
// so an expert of the layer just computed is next needed a whole pass later,
// and one of the next layer almost at once. Plain LRU evicts exactly the
// experts needed soonest (on the bench model, a 56-slot cache over 80 experts
// per token got no hits with it). So a slot's value is
//     p / (1 + d)
// with d the MoE layers until its layer comes round again and p its chance of
// being used then, from the heat histogram ((h + 1) / (layer total + E)).
// The lowest value goes first; ties go to the least recently used.
//
// Thread-safe: the engine thread acquires/releases; reader threads only call
// finish_load(). Nothing here calls out while holding the lock but the
// policy, which is called only under it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "experts/cache_policy.h"
#include "io/aligned_buffer.h"
#include "store/heat.h"

namespace deltafin {

struct CacheOptions {
  uint64_t record_bytes = 0;   // one expert record
  size_t slots = 0;            // evictable slots (the --cache-gb budget, at least the working set)
  size_t pinned_slots = 0;     // --pin-gb
  size_t prefetch_reserve = 0; // a prefetch never leaves fewer claimable slots than this (demand's share)
  int64_t experts_per_layer = 1;  // key = layer * experts_per_layer + expert
  // The MoE layers first_layer .. first_layer + layer_cycle - 1 are visited in
  // order every pass; 0 = no cycle (the distance term is off). When
  // cycle_layers is given it is the cycle instead (the MoE layers in visit
  // order, for families whose MoE layers are not contiguous).
  int64_t first_layer = 1, layer_cycle = 0;
  std::vector<int64_t> cycle_layers;
  const HeatHistogram* heat = nullptr;  // read on the engine thread only (acquire), may be null
  CachePolicyKind policy = CachePolicyKind::CycleHeat;
  int64_t top_k = 1;     // experts per token at a layer (the cycle-reuse policy's prior)
  bool buffers = true;   // false: slots hold no bytes (cache-sim: data() is null)
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

  // The layer being computed now (the reference point of the layer cycle).
  // `again`: the same layer is asked for once more before the next one (a
  // layer-major prefill computes a layer in several slices of rows), so its
  // experts are the ones needed soonest, not the ones needed last.
  void set_current_layer(int64_t layer, bool again = false);
  // Detaches a loading prefetch whose read was cancelled: the key is free to
  // be claimed and read afresh at once, and the slot becomes Empty when the
  // cancelled read's finish_load() arrives.
  void forget(int64_t key);
  // (key, ticket) of every slot loading by prefetch (to cancel stale ones).
  std::vector<std::pair<int64_t, uint64_t>> loading_prefetches() const;

  size_t slot_count() const { return slots_.size(); }
  size_t pinned_count() const { return pinned_; }
  size_t ready_count() const;
  // Whether `key` is in a slot, Ready or Loading (a demand acquire would not claim).
  bool contains(int64_t key) const;
  // Ends the "prefetched, not used yet" mark of the layer's Ready slots (its
  // demands have come: what was not used was a wrong prediction).
  void unmark_prefetched(int64_t layer);
  uint64_t evictions() const;
  const std::string& policy_name() const { return policy_name_; }

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

  int find_victim_locked(bool demand);
  Claim claim_locked(int64_t key, int slot, bool demand);
  // A slot's key leaves it (index and policy); the slot becomes Empty.
  void empty_locked(int slot);

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Slot> slots_;
  // key -> its slot, -1 none (keys are layer * experts + expert: dense).
  std::vector<int> index_;
  int slot_of(int64_t key) const {
    return key >= 0 && static_cast<size_t>(key) < index_.size() ? index_[static_cast<size_t>(key)] : -1;
  }
  void set_slot_of(int64_t key, int slot);
  std::unique_ptr<CachePolicy> policy_;
  std::string policy_name_;
  // The evictable Empty slots by (last use, slot): the first is taken first, as a scan in slot order took them.
  std::set<std::pair<uint64_t, int>> empty_;
  int64_t experts_per_layer_ = 1;
  size_t pinned_ = 0, reserve_ = 0;
  uint64_t tick_ = 0, evictions_ = 0, version_ = 0;
};

}  // namespace deltafin
