#include "experts/expert_cache.h"

#include "util/error.h"

namespace deltafin {

ExpertCache::ExpertCache(const CacheOptions& o)
    : heat_(o.heat),
      experts_per_layer_(o.experts_per_layer < 1 ? 1 : o.experts_per_layer),
      first_layer_(o.first_layer),
      layer_cycle_(o.layer_cycle < 0 ? 0 : o.layer_cycle),
      current_layer_(o.first_layer) {
  if (o.record_bytes == 0) fail("expert cache: record size is 0");
  if (o.slots == 0) fail("expert cache: needs at least one slot");
  slots_.resize(o.slots + o.pinned_slots);
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].buffer = make_aligned_buffer(o.record_bytes);
    slots_[i].pinned = i >= o.slots;
  }
  pinned_ = o.pinned_slots;
  reserve_ = o.prefetch_reserve;
  if (!o.cycle_layers.empty()) {
    layer_cycle_ = static_cast<int64_t>(o.cycle_layers.size());
    for (size_t i = 0; i < o.cycle_layers.size(); ++i) {
      const int64_t l = o.cycle_layers[i];
      if (l < 0 || (i && l <= o.cycle_layers[i - 1])) fail("expert cache: cycle layers must rise from 0");
      cycle_position_.resize(static_cast<size_t>(l) + 1, -1);
      cycle_position_[static_cast<size_t>(l)] = static_cast<int64_t>(i);
    }
    current_layer_ = o.cycle_layers.front();
  }
}

int64_t ExpertCache::position(int64_t layer) const {
  if (cycle_position_.empty()) return layer - first_layer_;
  return layer >= 0 && static_cast<size_t>(layer) < cycle_position_.size() ? cycle_position_[static_cast<size_t>(layer)] : -1;
}

// p / (1 + d): see the header. Read on the engine thread (acquire) only.
double ExpertCache::value_locked(const Slot& s) const {
  const int64_t layer = s.key / experts_per_layer_, expert = s.key % experts_per_layer_;
  double p = 1.0;
  if (heat_ && layer < heat_->layers())
    p = (heat_->at(layer, expert) + 1.0) / (heat_->layer_total(layer) + static_cast<double>(experts_per_layer_));
  double d = 0;
  if (layer_cycle_ > 0) {
    const int64_t m = position(layer), cur = position(current_layer_);
    d = static_cast<double>(((m - cur - 1) % layer_cycle_ + layer_cycle_) % layer_cycle_);
    // The current layer comes again first: distance 0, every other layer one further.
    if (current_again_) d = m == cur ? 0.0 : d + 1.0;
  }
  return p / (1.0 + d);
}

// Empty slots first, then the evictable ready (or failed, unreferenced) slot
// of lowest value. A prefetch may not take a slot if fewer than reserve_
// claimable slots would remain for demand reads, nor evict another prefetch
// not used yet (that trades one speculative read for another and wastes the
// first).
int ExpertCache::find_victim_locked(bool demand) const {
  int best = -1, claimable = 0;
  double best_value = 0;
  bool best_empty = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.pinned || s.refs > 0 || s.state == State::Loading) continue;
    ++claimable;
    if (!demand && s.prefetched && s.state == State::Ready) continue;
    const bool empty = s.state == State::Empty;
    const double v = empty ? 0 : value_locked(s);
    const bool better = best < 0 || (empty && !best_empty) ||
                        (empty == best_empty && (v < best_value || (v == best_value && s.last_use < slots_[static_cast<size_t>(best)].last_use)));
    if (better) {
      best = static_cast<int>(i);
      best_value = v;
      best_empty = empty;
    }
  }
  if (!demand && claimable <= static_cast<int>(reserve_)) return -1;
  return best;
}

ExpertCache::Claim ExpertCache::claim_locked(int64_t key, int slot, bool demand) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.key >= 0) {
    index_.erase(s.key);
    if (s.state == State::Ready) ++evictions_;
  }
  s.key = key;
  s.state = State::Loading;
  s.refs = demand ? 1 : 0;
  s.prefetched = !demand;
  s.last_use = ++tick_;
  s.ticket = 0;
  s.error.clear();
  index_[key] = slot;
  return Claim{Outcome::Claimed, slot, 0, false};
}

ExpertCache::Claim ExpertCache::acquire(int64_t key, bool demand) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    Slot& s = slots_[static_cast<size_t>(it->second)];
    if (s.state == State::Ready || s.state == State::Loading) {
      Claim c{s.state == State::Ready ? Outcome::Ready : Outcome::Loading, it->second, s.ticket, s.prefetched};
      if (demand) {
        ++s.refs;
        s.prefetched = false;
        s.last_use = ++tick_;
      }
      return c;
    }
    // Failed and unreferenced slots are claimable again below.
    if (s.refs == 0) return claim_locked(key, it->second, demand);
    return Claim{Outcome::Full, -1, 0, false, version_};
  }
  const int victim = find_victim_locked(demand);
  if (victim < 0) return Claim{Outcome::Full, -1, 0, false, version_};
  return claim_locked(key, victim, demand);
}

ExpertCache::Claim ExpertCache::acquire_pinned(int64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(key)) return Claim{Outcome::Full, -1, 0, false, version_};
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].pinned && slots_[i].state == State::Empty) return claim_locked(key, static_cast<int>(i), false);
  return Claim{Outcome::Full, -1, 0, false, version_};
}

void ExpertCache::set_ticket(int slot, uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_[static_cast<size_t>(slot)].ticket = ticket;
}

void ExpertCache::finish_load(int slot, bool ok, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = slots_[static_cast<size_t>(slot)];
    s.ticket = 0;
    ++version_;
    if (s.key < 0) {
      s.state = State::Empty;  // forgotten while loading: nobody waits for it
    } else if (ok) {
      s.state = State::Ready;
    } else if (s.refs > 0) {
      s.state = State::Failed;  // a demand waiter reads the error, then releases
      s.error = error;
    } else {
      index_.erase(s.key);
      s.key = -1;
      s.state = State::Empty;
    }
  }
  changed_.notify_all();
}

void ExpertCache::release(int slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.refs <= 0) fail("expert cache: release of an unreferenced slot ", slot);
    ++version_;
    if (--s.refs == 0 && s.state == State::Failed) {
      index_.erase(s.key);
      s.key = -1;
      s.state = State::Empty;
    }
  }
  changed_.notify_all();
}

size_t ExpertCache::wait_any(std::span<const int> slots) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots_[static_cast<size_t>(slots[i])].state != State::Loading) return i;
    changed_.wait(lock);
  }
}

void ExpertCache::wait_change(uint64_t version) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return version_ != version; });
}

ExpertCache::State ExpertCache::state(int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_[static_cast<size_t>(slot)].state;
}

std::string ExpertCache::error(int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_[static_cast<size_t>(slot)].error;
}

int64_t ExpertCache::key(int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_[static_cast<size_t>(slot)].key;
}

void ExpertCache::set_current_layer(int64_t layer, bool again) {
  std::lock_guard<std::mutex> lock(mu_);
  current_layer_ = layer;
  current_again_ = again;
}

void ExpertCache::forget(int64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  Slot& s = slots_[static_cast<size_t>(it->second)];
  if (s.state != State::Loading || s.refs > 0) return;
  index_.erase(it);
  s.key = -1;
}

std::vector<std::pair<int64_t, uint64_t>> ExpertCache::loading_prefetches() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int64_t, uint64_t>> out;
  for (const Slot& s : slots_)
    if (!s.pinned && s.state == State::Loading && s.prefetched && s.refs == 0 && s.ticket != 0) out.push_back({s.key, s.ticket});
  return out;
}

void ExpertCache::unmark_prefetched(int64_t layer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& s : slots_)
    if (s.key >= 0 && s.key / experts_per_layer_ == layer && s.state == State::Ready) s.prefetched = false;
}

bool ExpertCache::contains(int64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  const State st = slots_[static_cast<size_t>(it->second)].state;
  return st == State::Ready || st == State::Loading;
}

size_t ExpertCache::ready_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Slot& s : slots_) n += s.state == State::Ready;
  return n;
}

uint64_t ExpertCache::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

}  // namespace deltafin
