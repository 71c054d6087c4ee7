#include "experts/streaming_source.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "experts/prefetch_gate.h"
#include "util/error.h"

namespace deltafin {

namespace {
// Cache tickets of fetches carry this bit, so promote/abort reach the fetcher;
// those of striped reads the next one, so they reach every stripe's read.
constexpr uint64_t kFetchTicket = 1ull << 63;
constexpr uint64_t kStripedTicket = 1ull << 62;

// Weight of a new sample in a layer's idle-window EMA.
constexpr double kIdleEmaAlpha = 0.2;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

StreamingExpertSource::StreamingExpertSource(const StoreManifest& m, const StreamOptions& o, HeatHistogram* heat,
                                             Monitor* monitor, int64_t experts_per_token)
    : m_(m),
      heat_(heat),
      monitor_(monitor),
      evictable_slots_(o.cache_slots),
      experts_per_token_(experts_per_token),
      gate_by_idle_(o.gate_prefetch_by_idle),
      idle_ema_s_(static_cast<size_t>(m.layers), -1.0),
      reuse_(m.layers) {
  CacheOptions co;
  co.record_bytes = m.expert_bytes;
  co.slots = o.cache_slots;
  co.pinned_slots = o.pinned_slots;
  // Prefetch may never take the slots one layer's demand reads need.
  co.prefetch_reserve = static_cast<size_t>(experts_per_token);
  co.experts_per_layer = m.experts;
  co.heat = heat;
  co.policy = o.cache_policy;
  co.top_k = experts_per_token;
  co.cycle_layers = m.moe_layers;  // the manifest's MoE layers come round every pass
  cache_ = std::make_unique<ExpertCache>(co);
  std::vector<DriveSpec> drives;
  for (const StoreDrive& d : m.drives) drives.push_back({d.path, d.read_bytes_per_s});
  reader_ = std::make_unique<ExpertReader>(drives, o.reader, monitor);
  prefetched_.resize(static_cast<size_t>(m.layers));
  if (m.remote) {
    if (!o.fetch) fail(o.store_dir, ": a streamed store (experts on the mirror ", m.remote->url, ") needs fetch options");
    fetcher_ = std::make_unique<ExpertFetcher>(o.store_dir, m, *o.fetch);
    // Torn hash slots (a crash mid-write) are not trusted: said here, fetched again when needed.
    for (const std::string& slot : fetcher_->damaged_hash_slots())
      std::fprintf(stderr, "%s/remote/hashes.bin: the slot of %s is damaged; that expert will be fetched again\n",
                   o.store_dir.c_str(), slot.c_str());
    if (heat_ && fetcher_->disk_budget_bytes()) fetcher_->set_heat(*heat_);
  }
}

void StreamingExpertSource::submit_fetch(int64_t layer, int64_t expert, int slot, ReadPriority priority) {
  FetchRequest r;
  r.layer = layer;
  r.expert = expert;
  r.priority = priority;
  r.dest = cache_->data(slot);
  r.on_done = [this, slot, bytes = m_.expert_bytes](const ReadResult& res) {
    if (res.ok) bytes_read_.fetch_add(bytes);
    cache_->finish_load(slot, res.ok, res.error);
  };
  cache_->set_ticket(slot, fetcher_->submit(std::move(r)) | kFetchTicket);
}

struct StreamingExpertSource::StripedRead {
  std::vector<uint64_t> tickets;  // the reader's, one per stripe
  std::atomic<size_t> left{0};    // stripes not yet done
  std::mutex mu;
  bool ok = true;
  std::string error;  // the first failed stripe's (names layer, expert, drive, path)
};

std::shared_ptr<StreamingExpertSource::StripedRead> StreamingExpertSource::striped_read(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(striped_mu_);
  auto it = striped_.find(ticket & ~kStripedTicket);
  return it == striped_.end() ? nullptr : it->second;
}

void StreamingExpertSource::promote(uint64_t ticket) {
  if (ticket & kFetchTicket) return fetcher_->promote(ticket & ~kFetchTicket);
  if (!(ticket & kStripedTicket)) return reader_->promote(ticket);
  if (auto g = striped_read(ticket))
    for (uint64_t t : g->tickets) reader_->promote(t);
}

// A striped read is stopped when any of its stripes is: the slot then fails
// as cancelled once the others are done.
bool StreamingExpertSource::abort(uint64_t ticket) {
  if (ticket & kFetchTicket) return fetcher_->cancel(ticket & ~kFetchTicket);
  if (!(ticket & kStripedTicket)) return reader_->abort(ticket);
  bool any = false;
  if (auto g = striped_read(ticket))
    for (uint64_t t : g->tickets) any = reader_->abort(t) || any;
  return any;
}

void StreamingExpertSource::submit(int64_t layer, int64_t expert, int slot, ReadPriority priority) {
  // A streamed store reads an expert from its drive once it is there (held
  // against eviction until the read is done) and fetches it otherwise.
  const bool held = fetcher_ && fetcher_->hold_local(layer, expert);
  try {
    if (fetcher_ && !held) return submit_fetch(layer, expert, slot, priority);
    submit_read(layer, expert, slot, priority, held);
  } catch (const std::exception& e) {
    // Nothing was queued: give the hold and the claimed slot back, so the
    // expert stays evictable and no waiter waits for a read that never comes.
    if (held) fetcher_->release_local(layer, expert);
    cache_->finish_load(slot, false, e.what());
    if (priority == ReadPriority::Demand) cache_->release(slot);  // a demand claim holds a reference
    throw;
  }
}

void StreamingExpertSource::submit_striped(int64_t layer, int64_t expert, int slot, ReadPriority priority) {
  const ExpertEntry& e = m_.entry(layer, expert);
  auto g = std::make_shared<StripedRead>();
  const size_t n = m_.drives.size();
  g->left = n;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(striped_mu_);
    id = next_striped_++;
    striped_[id] = g;
  }
  // One stripe is done: the last one finishes the slot.
  auto stripe_done = [this, g, id, slot](bool ok, const std::string& error) {
    {
      std::lock_guard<std::mutex> lock(g->mu);
      if (!ok) g->ok = false;
      if (!ok && g->error.empty()) g->error = error;
    }
    if (g->left.fetch_sub(1) != 1) return;
    {
      std::lock_guard<std::mutex> lock(striped_mu_);
      striped_.erase(id);
    }
    cache_->finish_load(slot, g->ok, g->error);
  };
  for (size_t d = 0; d < n; ++d) {
    ReadRequest r;
    r.layer = layer;
    r.expert = expert;
    r.priority = priority;
    r.drives = {static_cast<int>(d)};
    r.paths = {m_.stripe_path(static_cast<int>(d), layer, expert)};
    r.bytes = m_.stripe_bytes(static_cast<int>(d));
    r.dest = cache_->data(slot) + m_.stripe_offsets[d];
    r.crc32c = e.stripe_crc32c.at(d);
    r.on_done = [this, stripe_done, bytes = r.bytes](const ReadResult& res) {
      if (res.ok) bytes_read_.fetch_add(bytes);
      stripe_done(res.ok, res.error);
    };
    try {
      g->tickets.push_back(reader_->submit(std::move(r)));
    } catch (...) {
      // Nothing queued yet: the caller gives the slot back. Otherwise the
      // stripes not queued count as failed, and the last read to land
      // finishes the slot.
      if (d == 0) {
        std::lock_guard<std::mutex> lock(striped_mu_);
        striped_.erase(id);
        throw;
      }
      const std::string why = cat("layer ", layer, " expert ", expert, ": stripe ", d, " could not be queued");
      for (size_t k = d; k < n; ++k) stripe_done(false, why);
      break;
    }
  }
  cache_->set_ticket(slot, id | kStripedTicket);
}

void StreamingExpertSource::submit_read(int64_t layer, int64_t expert, int slot, ReadPriority priority, bool held) {
  if (m_.striped()) return submit_striped(layer, expert, slot, priority);
  const ExpertEntry& e = m_.entry(layer, expert);
  ReadRequest r;
  r.layer = layer;
  r.expert = expert;
  r.priority = priority;
  for (uint16_t d : e.drives) {
    r.drives.push_back(d);
    r.paths.push_back(m_.expert_path(d, layer, expert));
  }
  r.bytes = m_.expert_bytes;
  r.dest = cache_->data(slot);
  r.crc32c = e.crc32c;
  if (!e.hash_known) {
    const std::optional<ExpertHash> h = fetcher_->hash(layer, expert);
    if (!h) fail("layer ", layer, " expert ", expert, ": on the drive but no hash is recorded");  // hold_local excludes it
    r.crc32c = h->crc32c;
  }
  // Runs on a reader thread (several may run at once): only atomics and the
  // cache's and fetcher's own locks here.
  r.on_done = [this, slot, held, layer, expert, bytes = m_.expert_bytes](const ReadResult& res) {
    if (res.ok) bytes_read_.fetch_add(bytes);
    if (held) fetcher_->release_local(layer, expert);
    cache_->finish_load(slot, res.ok, res.error);
  };
  const uint64_t ticket = reader_->submit(std::move(r));
  cache_->set_ticket(slot, ticket);
}

// Prefetches of this layer that the real route does not use are dropped —
// the rest of a started one too — so they do not take drive time from demand
// reads (on a saturated drive every wasted byte costs time).
void StreamingExpertSource::cancel_stale(int64_t layer, std::span<const int64_t> needed) {
  for (const auto& [k, ticket] : cache_->loading_prefetches()) {
    if (k / m_.experts != layer) continue;
    if (std::find(needed.begin(), needed.end(), k % m_.experts) != needed.end()) continue;
    if (!abort(ticket)) continue;
    cache_->forget(k);  // a later demand reads it afresh instead of waiting on the cancelled read
    ++c_.prefetch_cancelled;
  }
}

void StreamingExpertSource::for_each_ready_group(int64_t layer, std::span<const int64_t> experts,
                                                 const std::function<void(std::span<const ReadyExpert>)>& use) {
  // One slice of a layer asked for in several (begin_layer): the layer's
  // bookkeeping (lost predictions, stale ones cancelled against the whole
  // union) happens at its first slice, its end-of-layer steps at its last.
  const bool sliced = layer == sliced_layer_ && slices_left_ > 0;
  const bool first_slice = !sliced || slices_left_ == slices_total_;
  const bool more_slices = sliced && slices_left_ > 1;
  if (sliced && --slices_left_ == 0) sliced_layer_ = -1;
  cache_->set_current_layer(layer, more_slices);
  if (first_slice) {
    // The drives' idle window before this layer: since the layer before's last read landed.
    if (landed_layer_ == layer - 1 && landed_layer_ >= 0) {
      const double idle = seconds_since(landed_at_);
      double& ema = idle_ema_s_[static_cast<size_t>(layer)];
      ema = ema_step(ema, idle, kIdleEmaAlpha);
    }
    landed_layer_ = -1;
    const std::span<const int64_t> layer_needs = sliced ? std::span<const int64_t>(sliced_union_) : experts;
    if (deferred_layer_ == layer) drop_deferred();  // its demand reads take over now
    for (int64_t e : prefetched_[static_cast<size_t>(layer)])
      if (std::find(layer_needs.begin(), layer_needs.end(), e) != layer_needs.end() && !cache_->contains(key(layer, e)))
        ++c_.prefetch_lost;
    prefetched_[static_cast<size_t>(layer)].clear();
    cancel_stale(layer, layer_needs);
  }
  struct Held {
    size_t index;
    int slot;
  };
  std::vector<Held> ready, pending;
  std::vector<size_t> deferred;
  c_.demanded += experts.size();
  const auto phase_start = std::chrono::steady_clock::now();
  auto last_landed = phase_start;  // no read at all: the drives were idle from the start
  const size_t li = static_cast<size_t>(layer);
  if (c_.layer_expert_s.size() <= li) c_.layer_expert_s.resize(li + 1, 0.0), c_.layer_wait_s.resize(li + 1, 0.0);
  if (heat_) {
    for (int64_t e : experts) heat_->add(layer, e);
    if (pass_positions_ == 1 && sliced_layer_ != layer) reuse_.decoded(layer, experts, *heat_);
  }

  // Takes (or starts) expert `i`; false when no slot is free right now.
  uint64_t full_version = 0;
  auto take = [&](size_t i) {
    const int64_t e = experts[i];
    ExpertCache::Claim c = cache_->acquire(key(layer, e), true);
    switch (c.outcome) {
      case ExpertCache::Outcome::Ready:
        ++c_.hits;
        c_.prefetch_hits += c.prefetched;
        if (monitor_) monitor_->cache_hit(layer, e);
        ready.push_back({i, c.slot});
        return true;
      case ExpertCache::Outcome::Loading:
        ++c_.inflight;
        if (c.ticket) promote(c.ticket);
        pending.push_back({i, c.slot});
        return true;
      case ExpertCache::Outcome::Claimed:
        ++c_.misses;
        submit(layer, e, c.slot, ReadPriority::Demand);
        pending.push_back({i, c.slot});
        return true;
      case ExpertCache::Outcome::Full:
        full_version = c.version;
        return false;
    }
    return false;
  };
  // Computes slots that are no longer loading, as one group, and gives them
  // back (taken out of `held` first, so the handler below releases each once).
  // A failed read fails the request without computing any of them.
  auto finish = [&](std::vector<Held>& held) {
    std::vector<Held> group;
    group.swap(held);
    std::vector<ReadyExpert> ready_group;
    std::string err;
    for (const Held& h : group) {
      if (cache_->state(h.slot) == ExpertCache::State::Ready) {
        ready_group.push_back({h.index, cache_->data(h.slot)});
      } else if (err.empty()) {
        err = cache_->error(h.slot);
        if (err.empty()) err = cat("layer ", layer, " expert ", experts[h.index], ": read failed");
      }
    }
    try {
      if (err.empty()) use(ready_group);
    } catch (...) {
      for (const Held& h : group) cache_->release(h.slot);
      throw;
    }
    for (const Held& h : group) cache_->release(h.slot);
    if (!err.empty()) fail(err);
  };
  // Moves the pending slots whose reads have landed to `ready`.
  auto collect_landed = [&] {
    for (size_t j = 0; j < pending.size();)
      if (cache_->state(pending[j].slot) != ExpertCache::State::Loading) {
        ready.push_back(pending[j]);
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(j));
      } else {
        ++j;
      }
  };

  try {
    size_t next_deferred = 0;
    // Experts already in RAM (or on their way) are taken first: claiming a
    // slot for a miss may evict an unreferenced entry, and when the layer's
    // union is larger than the cache that could be one of this layer's own
    // prefetched experts, read for nothing.
    std::vector<size_t> order, misses;
    for (size_t i = 0; i < experts.size(); ++i) (cache_->contains(key(layer, experts[i])) ? order : misses).push_back(i);
    order.insert(order.end(), misses.begin(), misses.end());
    for (size_t i : order)
      if (!take(i)) deferred.push_back(i);
    for (;;) {
      // Hits first (a deferred expert may also turn out a hit): compute while the misses are read.
      if (!ready.empty()) finish(ready);
      while (next_deferred < deferred.size() && take(deferred[next_deferred])) ++next_deferred;
      // While slices of this layer are still to come, a released slot is theirs.
      if (next_deferred == deferred.size() && !more_slices) issue_deferred(layer);
      if (!ready.empty()) continue;
      if (pending.empty() && next_deferred == deferred.size()) break;
      auto t0 = std::chrono::steady_clock::now();
      if (pending.empty()) {
        // Every slot is taken by reads this layer did not start (prefetches
        // in flight, cancelled ones not yet landed): wait for one to free.
        slot_waits_.fetch_add(1);
        cache_->wait_change(full_version);
        const double waited = seconds_since(t0);
        c_.wait_s += waited, c_.layer_wait_s[li] += waited;
        continue;
      }
      std::vector<int> slots;
      for (const Held& h : pending) slots.push_back(h.slot);
      const size_t j = cache_->wait_any(slots);
      last_landed = std::chrono::steady_clock::now();
      const double waited = seconds_since(t0);
      c_.wait_s += waited, c_.layer_wait_s[li] += waited;
      ready.push_back(pending[j]);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(j));
      collect_landed();  // and every other read that has landed meanwhile
      finish(ready);
    }
    if (!more_slices) {
      landed_layer_ = layer;
      landed_at_ = last_landed;
      issue_deferred(layer);  // the last releases: the next layer's reads start before this layer's tail compute ends
      // This layer's wrong predictions are ordinary entries from now on: the
      // "a prefetch may not evict an unused prefetch" rule protects only
      // predictions whose layer is still to come.
      cache_->unmark_prefetched(layer);
    }
    c_.layer_expert_s[li] += seconds_since(phase_start);
  } catch (...) {
    for (const Held& h : ready) cache_->release(h.slot);
    for (const Held& h : pending) cache_->release(h.slot);
    throw;
  }
}

ExpertHandle StreamingExpertSource::get(int64_t layer, int64_t expert) {
  // A copy, so the handle outlives the slot: only tests and tools use get().
  auto copy = std::make_shared<std::vector<uint8_t>>(m_.expert_bytes);
  const int64_t one[1] = {expert};
  for_each_ready(layer, one, [&](size_t, const uint8_t* p) { std::copy(p, p + m_.expert_bytes, copy->data()); });
  return {copy->data(), copy};
}

// A prefetch for layer L+1 is issued while layer L still has its own reads
// to make, and those take slots first: a prefetched expert evicted to make
// room for them was read for nothing. Layer L of a T-row pass needs about
// E (1 - (1 - k/E)^T) experts (the expected union of T routes of k among E),
// so prefetch only into the slots left after that and the demand reserve.
// (Measured before this rule: a 512-token prefill with a cache smaller than
// one layer's union read 1.40x the bytes it needed, every prefetch evicted
// unused; bench/results/2026-11-30-prefill.md, "Before".)
size_t StreamingExpertSource::prefetch_room() const {
  const double E = static_cast<double>(m_.experts), k = static_cast<double>(experts_per_token_);
  const double T = static_cast<double>(std::max<size_t>(pass_positions_, 1));
  const double union_size = E * (1.0 - std::pow(1.0 - k / E, T));
  const double room = static_cast<double>(evictable_slots_) - std::ceil(union_size) - k;
  return room > 0 ? static_cast<size_t>(room) : 0;
}

// --lookahead auto: how many of a layer's predictions to read (see
// experts/prefetch_gate.h): what the drives can read in the layer's measured
// idle window, most confident first; everything before it is measured.
// (Measured on 4 striped drives: reading every prediction at recall 0.61 made
// decode 5.7 % slower than no lookahead, the gate 0.7 %;
// bench/results/2026-11-30-streaming.md, section 2.)
size_t StreamingExpertSource::prefetch_budget(int64_t layer) {
  const double idle = idle_ema_s_[static_cast<size_t>(layer)];
  if (!gate_by_idle_ || idle < 0) return SIZE_MAX;
  double bw = 0;
  for (const DriveStatus& d : reader_->drive_status()) bw += d.est_bytes_per_s;
  return idle_window_reads(idle, bw, m_.expert_bytes);
}

void StreamingExpertSource::prefetch(int64_t layer, std::span<const int64_t> experts) {
  std::vector<int64_t> kept;
  if (const size_t budget = prefetch_budget(layer); budget != SIZE_MAX) {
    size_t dropped = 0;
    kept = within_read_budget(experts, budget, [&](int64_t e) { return cache_->contains(key(layer, e)); }, &dropped);
    c_.prefetch_gated += dropped;
    experts = kept;
  }
  const size_t room = prefetch_room();
  drop_deferred();
  if (experts.size() > room) {
    // The rest waits for slots the current layer gives back (issue_deferred).
    deferred_layer_ = layer;
    deferred_prefetch_.assign(experts.begin() + static_cast<std::ptrdiff_t>(room), experts.end());
    experts = experts.first(room);  // single-row predictions come most confident first
  }
  for (int64_t e : experts) {
    ExpertCache::Claim c = cache_->acquire(key(layer, e), false);
    if (c.outcome == ExpertCache::Outcome::Full) break;  // the rest would not fit either
    if (c.outcome != ExpertCache::Outcome::Claimed) continue;
    submit(layer, e, c.slot, ReadPriority::Prefetch);
    note_prefetched(layer, e);
    ++c_.prefetch_issued;
  }
}

// Called while `current_layer` is being computed and all its experts have
// their slots: a slot it releases can only be wanted next by layer
// current_layer + 1, so a prediction for that layer may take it without
// displacing a read this layer needs, and the eviction order (recency in the
// layer cycle) keeps it until its layer comes. Stops at the first Full: the
// next release tries again.
void StreamingExpertSource::issue_deferred(int64_t current_layer) {
  if (deferred_layer_ != current_layer + 1) return;
  while (!deferred_prefetch_.empty()) {
    const int64_t e = deferred_prefetch_.front();
    ExpertCache::Claim c = cache_->acquire(key(deferred_layer_, e), false);
    if (c.outcome == ExpertCache::Outcome::Full) return;
    deferred_prefetch_.erase(deferred_prefetch_.begin());
    if (c.outcome != ExpertCache::Outcome::Claimed) continue;  // already there or on its way
    submit(deferred_layer_, e, c.slot, ReadPriority::Prefetch);
    note_prefetched(deferred_layer_, e);
    ++c_.prefetch_issued;
    ++c_.prefetch_deferred;
  }
}

void StreamingExpertSource::note_prefetched(int64_t layer, int64_t expert) {
  prefetched_[static_cast<size_t>(layer)].push_back(expert);
}

void StreamingExpertSource::drop_deferred() {
  c_.prefetch_skipped += deferred_prefetch_.size();
  deferred_prefetch_.clear();
  deferred_layer_ = -1;
}

void StreamingExpertSource::begin_layer(int64_t layer, std::span<const int64_t> union_experts, size_t requests) {
  if (requests < 2) return;
  sliced_layer_ = layer;
  slices_left_ = slices_total_ = requests;
  sliced_union_.assign(union_experts.begin(), union_experts.end());
}

void StreamingExpertSource::begin_pass(size_t positions) {
  if (positions != 1) reuse_.break_chain();
  pass_positions_ = positions;
  sliced_layer_ = -1;
  slices_left_ = slices_total_ = 0;
}

void StreamingExpertSource::end_pass() {
  drop_deferred();
  if (heat_) heat_->decay(std::pow(kHeatDecayPerPosition, static_cast<double>(pass_positions_)));
  // The fetcher evicts by heat on its own threads: it gets a copy.
  if (heat_ && fetcher_ && fetcher_->disk_budget_bytes()) fetcher_->set_heat(*heat_);
}

size_t StreamingExpertSource::warm_pinned() {
  if (!heat_ || cache_->pinned_count() == 0) return 0;
  size_t n = 0;
  for (const auto& [layer, expert] : heat_->hottest(cache_->pinned_count())) {
    ExpertCache::Claim c = cache_->acquire_pinned(key(layer, expert));
    if (c.outcome != ExpertCache::Outcome::Claimed) continue;
    submit(layer, expert, c.slot, ReadPriority::Prefetch);
    ++n;
  }
  return n;
}

StreamCounters StreamingExpertSource::counters() const {
  StreamCounters c = c_;
  c.bytes_read = bytes_read_.load();
  c.slot_waits = slot_waits_.load();
  if (fetcher_) c.fetch = fetcher_->counters();
  return c;
}

}  // namespace deltafin
