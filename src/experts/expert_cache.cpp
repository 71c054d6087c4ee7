#include "experts/expert_cache.h"

#include "util/error.h"

namespace deltafin {

ExpertCache::ExpertCache(const CacheOptions& o)
    : experts_per_layer_(o.experts_per_layer < 1 ? 1 : o.experts_per_layer) {
  if (o.record_bytes == 0) fail("expert cache: record size is 0");
  if (o.slots == 0) fail("expert cache: needs at least one slot");
  CachePolicyShape shape;
  shape.experts_per_layer = experts_per_layer_;
  shape.top_k = o.top_k;
  shape.first_layer = o.first_layer;
  shape.layer_cycle = o.layer_cycle;
  shape.cycle_layers = o.cycle_layers;
  shape.heat = o.heat;
  policy_ = make_cache_policy(o.policy, shape);
  policy_name_ = cache_policy_name(o.policy);
  slots_.resize(o.slots + o.pinned_slots);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (o.buffers) slots_[i].buffer = make_aligned_buffer(o.record_bytes);
    slots_[i].pinned = i >= o.slots;
    if (!slots_[i].pinned) empty_.insert({0, static_cast<int>(i)});
  }
  pinned_ = o.pinned_slots;
  reserve_ = o.prefetch_reserve;
}

// An Empty slot first (the least recently used of them, then the lowest),
// else the policy's choice among the evictable ready (or failed,
// unreferenced) slots. A prefetch may not take a slot if fewer than reserve_
// claimable slots would remain for demand reads, nor evict another prefetch
// not used yet (that trades one speculative read for another and wastes the
// first).
int ExpertCache::find_victim_locked(bool demand) {
  if (!demand) {
    size_t claimable = 0;
    for (const Slot& s : slots_) claimable += !(s.pinned || s.refs > 0 || s.state == State::Loading);
    if (claimable <= reserve_) return -1;
  }
  if (!empty_.empty()) return empty_.begin()->second;
  const int64_t key = policy_->victim([&](int64_t k) {
    const Slot& s = slots_[static_cast<size_t>(slot_of(k))];
    return !s.pinned && s.refs == 0 && s.state != State::Loading &&
           (demand || !(s.prefetched && s.state == State::Ready));
  }, demand);
  return key < 0 ? -1 : slot_of(key);
}

ExpertCache::Claim ExpertCache::claim_locked(int64_t key, int slot, bool demand) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.key >= 0) {
    set_slot_of(s.key, -1);
    if (!s.pinned) policy_->erase(s.key);
    if (s.state == State::Ready) ++evictions_;
  }
  if (s.state == State::Empty && !s.pinned) empty_.erase({s.last_use, slot});
  s.key = key;
  s.state = State::Loading;
  s.refs = demand ? 1 : 0;
  s.prefetched = !demand;
  s.last_use = ++tick_;
  s.ticket = 0;
  s.error.clear();
  set_slot_of(key, slot);
  if (!s.pinned) policy_->insert(key, s.last_use, demand);
  return Claim{Outcome::Claimed, slot, 0, false};
}

void ExpertCache::set_slot_of(int64_t key, int slot) {
  if (key < 0) fail("expert cache: negative key ", key);
  if (static_cast<size_t>(key) >= index_.size()) index_.resize(static_cast<size_t>(key) + 1, -1);
  index_[static_cast<size_t>(key)] = slot;
}

void ExpertCache::empty_locked(int slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.key >= 0) {
    set_slot_of(s.key, -1);
    if (!s.pinned) policy_->erase(s.key);
  }
  s.key = -1;
  s.state = State::Empty;
  if (!s.pinned) empty_.insert({s.last_use, slot});
}

ExpertCache::Claim ExpertCache::acquire(int64_t key, bool demand) {
  std::lock_guard<std::mutex> lock(mu_);
  if (const int at = slot_of(key); at >= 0) {
    Slot& s = slots_[static_cast<size_t>(at)];
    if (s.state == State::Ready || s.state == State::Loading) {
      Claim c{s.state == State::Ready ? Outcome::Ready : Outcome::Loading, at, s.ticket, s.prefetched};
      if (demand) {
        ++s.refs;
        s.prefetched = false;
        s.last_use = ++tick_;
        if (!s.pinned) policy_->touch(key, s.last_use);
      }
      return c;
    }
    // Failed and unreferenced slots are claimable again below.
    if (s.refs == 0) return claim_locked(key, at, demand);
    return Claim{Outcome::Full, -1, 0, false, version_};
  }
  const int victim = find_victim_locked(demand);
  if (victim < 0) return Claim{Outcome::Full, -1, 0, false, version_};
  return claim_locked(key, victim, demand);
}

ExpertCache::Claim ExpertCache::acquire_pinned(int64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot_of(key) >= 0) return Claim{Outcome::Full, -1, 0, false, version_};
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
      empty_locked(slot);  // forgotten while loading: nobody waits for it
    } else if (ok) {
      s.state = State::Ready;
    } else if (s.refs > 0) {
      s.state = State::Failed;  // a demand waiter reads the error, then releases
      s.error = error;
    } else {
      empty_locked(slot);
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
    if (--s.refs == 0 && s.state == State::Failed) empty_locked(slot);
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
  policy_->set_current_layer(layer, again);
}

void ExpertCache::forget(int64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  const int at = slot_of(key);
  if (at < 0) return;
  Slot& s = slots_[static_cast<size_t>(at)];
  if (s.state != State::Loading || s.refs > 0) return;
  set_slot_of(key, -1);
  if (!s.pinned) policy_->erase(key);
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
  const int at = slot_of(key);
  if (at < 0) return false;
  const State st = slots_[static_cast<size_t>(at)].state;
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
