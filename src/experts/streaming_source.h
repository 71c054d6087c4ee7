// The streaming expert source (design.md §6): experts come from the RAM cache
// when present and otherwise from direct reads of the store's drives. Demand
// reads go first; lookahead hints become prefetch reads; the model computes
// each expert as soon as it is in RAM.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "experts/expert_cache.h"
#include "io/expert_reader.h"
#include "remote/expert_fetcher.h"
#include "model/common/expert_source.h"
#include "store/heat.h"
#include "store/store_manifest.h"

namespace deltafin {

// Cumulative counters; per-token figures are differences of two snapshots.
struct StreamCounters {
  uint64_t demanded = 0;       // expert uses requested by the model (one per expert per layer per pass)
  uint64_t hits = 0;           // in RAM when demanded
  uint64_t prefetch_hits = 0;  // of those, brought in by a prefetch
  uint64_t inflight = 0;       // a prefetch still reading when demanded (promoted to demand)
  uint64_t misses = 0;         // demand reads started
  uint64_t bytes_read = 0;     // completed reads, demand and prefetch
  uint64_t prefetch_issued = 0, prefetch_cancelled = 0;
  uint64_t prefetch_skipped = 0;  // predictions not read: no room left after the current layer's reads
  uint64_t prefetch_gated = 0;    // predictions not read: more than the drives' idle time before their layer holds
  uint64_t prefetch_deferred = 0; // predictions read later, into slots the current layer released
  uint64_t prefetch_lost = 0;     // predictions read, needed, but evicted before their layer came (wasted reads)
  uint64_t slot_waits = 0;        // demands that found every slot held by reads they did not start, and waited
  double wait_s = 0;           // engine thread blocked on reads
  // Per MoE layer (index = layer): time in the layer's expert phase (reads
  // waited for and experts computed, for_each_ready) and the part of it spent
  // blocked on reads. Expert phase minus waiting = that layer's expert compute.
  std::vector<double> layer_expert_s, layer_wait_s;
  FetchCounters fetch;         // streamed stores: experts fetched from the mirror
};

struct StreamOptions {
  size_t cache_slots = 0;      // evictable slots (>= working set, see experts/memory_plan)
  size_t pinned_slots = 0;
  CachePolicyKind cache_policy = CachePolicyKind::CycleHeat;  // --cache-policy (experts/cache_policy.h)
  ReaderOptions reader;
  // A streamed store (manifest.remote): experts not on the drives are fetched
  // from the mirror into the cache slot (and installed on the drives).
  std::string store_dir;
  std::optional<FetchOptions> fetch;
  // --lookahead auto: read only as many predictions for a layer as its drives
  // can read in the time they would otherwise sit idle before it (see
  // prefetch_budget); on: read them all.
  bool gate_prefetch_by_idle = false;
};

class StreamingExpertSource : public ExpertSource {
public:
  StreamingExpertSource(const StoreManifest& manifest, const StreamOptions& options, HeatHistogram* heat,
                        Monitor* monitor, int64_t experts_per_token);

  ExpertHandle get(int64_t layer, int64_t expert) override;
  void for_each_ready_group(int64_t layer, std::span<const int64_t> experts,
                            const std::function<void(std::span<const ReadyExpert>)>& use) override;
  void prefetch(int64_t layer, std::span<const int64_t> experts) override;
  void begin_layer(int64_t layer, std::span<const int64_t> union_experts, size_t requests) override;
  void begin_pass(size_t positions) override;
  void end_pass() override;

  // Starts reads of the hottest experts (by the heat histogram) into the pinned tier.
  size_t warm_pinned();

  StreamCounters counters() const;
  // counters().slot_waits, readable from any thread while a pass runs.
  uint64_t slot_waits() const { return slot_waits_.load(); }
  const ExpertReader& reader() const { return *reader_; }
  const ExpertCache& cache() const { return *cache_; }
  const ExpertFetcher* fetcher() const { return fetcher_.get(); }

private:
  int64_t key(int64_t layer, int64_t expert) const { return layer * m_.experts + expert; }
  void submit(int64_t layer, int64_t expert, int slot, ReadPriority priority);
  void submit_fetch(int64_t layer, int64_t expert, int slot, ReadPriority priority);
  void submit_read(int64_t layer, int64_t expert, int slot, ReadPriority priority, bool held);
  void submit_striped(int64_t layer, int64_t expert, int slot, ReadPriority priority);
  void promote(uint64_t ticket);
  bool abort(uint64_t ticket);
  void cancel_stale(int64_t layer, std::span<const int64_t> needed);
  size_t prefetch_room() const;
  size_t prefetch_budget(int64_t layer);
  void issue_deferred(int64_t current_layer);
  void drop_deferred();

  const StoreManifest& m_;
  HeatHistogram* heat_;
  Monitor* monitor_;
  // A striped expert is read as one request per drive (its stripes, each
  // straight into its place in the cache slot); the slot holds one ticket
  // for the group, found here by promote() and abort(). Declared before the
  // reader, whose callbacks erase from it while the reader shuts down.
  struct StripedRead;
  std::mutex striped_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<StripedRead>> striped_;
  uint64_t next_striped_ = 1;
  std::shared_ptr<StripedRead> striped_read(uint64_t ticket);  // null once the read is done
  // Destroyed in reverse order: the reader first (its callbacks release
  // fetcher holds and finish cache loads), then the fetcher (its callbacks
  // finish cache loads), then the cache whose buffers they all write into.
  std::unique_ptr<ExpertCache> cache_;
  std::unique_ptr<ExpertFetcher> fetcher_;  // streamed stores only
  std::unique_ptr<ExpertReader> reader_;
  StreamCounters c_;  // engine-thread fields
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> slot_waits_{0};
  size_t pass_positions_ = 0;
  // Predictions for the next layer that did not fit when predicted: issued
  // one by one as the current layer, all its reads claimed, releases slots.
  int64_t deferred_layer_ = -1;
  std::vector<int64_t> deferred_prefetch_;
  // Predictions read per layer, to count those lost before their layer came.
  std::vector<std::vector<int64_t>> prefetched_;
  void note_prefetched(int64_t layer, int64_t expert);
  // A layer asked for in slices (begin_layer): its union and the requests still to come.
  int64_t sliced_layer_ = -1;
  size_t slices_left_ = 0, slices_total_ = 0;
  std::vector<int64_t> sliced_union_;
  size_t evictable_slots_;
  int64_t experts_per_token_;
  // The idle-time gate: per layer, an EMA of the seconds between the last
  // read of the layer before it landing and the layer asking for its experts
  // (attention, routing, the previous layer's tail compute: the drives' idle
  // window that prefetch can fill); -1 until measured.
  bool gate_by_idle_;
  std::vector<double> idle_ema_s_;
  ReuseTracker reuse_;  // feeds heat_'s temporal reuse from decoded tokens (store/heat.h)
  int64_t landed_layer_ = -1;
  std::chrono::steady_clock::time_point landed_at_{};
};

}  // namespace deltafin
