// The expert cache's eviction policies (experts/cache_policy.h): cycle-heat
// makes exactly the decisions the cache made before policies were separate
// (its scan, kept below as the reference), and each policy's rule on cases
// worked by hand.
#include "experts/cache_policy.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "experts/expert_cache.h"

namespace deltafin {
namespace cache_policy_test {

using Outcome = ExpertCache::Outcome;
using State = ExpertCache::State;
using Claim = ExpertCache::Claim;

// ExpertCache's slot logic and eviction as they were before the policies
// (main at 77cc53a: find_victim_locked, value_locked and the state machine
// around them), single-threaded and without buffers: one scan of every slot,
// empty slots first, then the lowest p / (1 + d), ties to the least recently
// used.
class ScanCache {
public:
  explicit ScanCache(const CacheOptions& o)
      : heat_(o.heat),
        experts_per_layer_(o.experts_per_layer < 1 ? 1 : o.experts_per_layer),
        first_layer_(o.first_layer),
        layer_cycle_(o.layer_cycle < 0 ? 0 : o.layer_cycle),
        current_layer_(o.first_layer) {
    slots_.resize(o.slots + o.pinned_slots);
    for (size_t i = 0; i < slots_.size(); ++i) slots_[i].pinned = i >= o.slots;
    reserve_ = o.prefetch_reserve;
    if (!o.cycle_layers.empty()) {
      layer_cycle_ = static_cast<int64_t>(o.cycle_layers.size());
      for (size_t i = 0; i < o.cycle_layers.size(); ++i) {
        const int64_t l = o.cycle_layers[i];
        cycle_position_.resize(static_cast<size_t>(l) + 1, -1);
        cycle_position_[static_cast<size_t>(l)] = static_cast<int64_t>(i);
      }
      current_layer_ = o.cycle_layers.front();
    }
  }

  Claim acquire(int64_t key, bool demand) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      Slot& s = slots_[static_cast<size_t>(it->second)];
      if (s.state == State::Ready || s.state == State::Loading) {
        Claim c{s.state == State::Ready ? Outcome::Ready : Outcome::Loading, it->second, 0, s.prefetched};
        if (demand) {
          ++s.refs;
          s.prefetched = false;
          s.last_use = ++tick_;
        }
        return c;
      }
      if (s.refs == 0) return claim(key, it->second, demand);
      return Claim{Outcome::Full, -1, 0, false, 0};
    }
    const int victim = find_victim(demand);
    if (victim < 0) return Claim{Outcome::Full, -1, 0, false, 0};
    return claim(key, victim, demand);
  }
  Claim acquire_pinned(int64_t key) {
    if (index_.count(key)) return Claim{Outcome::Full, -1, 0, false, 0};
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].pinned && slots_[i].state == State::Empty) return claim(key, static_cast<int>(i), false);
    return Claim{Outcome::Full, -1, 0, false, 0};
  }
  void finish_load(int slot, bool ok) {
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.key < 0) {
      s.state = State::Empty;
    } else if (ok) {
      s.state = State::Ready;
    } else if (s.refs > 0) {
      s.state = State::Failed;
    } else {
      index_.erase(s.key);
      s.key = -1;
      s.state = State::Empty;
    }
  }
  void release(int slot) {
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (--s.refs == 0 && s.state == State::Failed) {
      index_.erase(s.key);
      s.key = -1;
      s.state = State::Empty;
    }
  }
  void set_current_layer(int64_t layer, bool again) {
    current_layer_ = layer;
    current_again_ = again;
  }
  void forget(int64_t key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    Slot& s = slots_[static_cast<size_t>(it->second)];
    if (s.state != State::Loading || s.refs > 0) return;
    index_.erase(it);
    s.key = -1;
  }
  void unmark_prefetched(int64_t layer) {
    for (Slot& s : slots_)
      if (s.key >= 0 && s.key / experts_per_layer_ == layer && s.state == State::Ready) s.prefetched = false;
  }
  int64_t key(int slot) const { return slots_[static_cast<size_t>(slot)].key; }
  State state(int slot) const { return slots_[static_cast<size_t>(slot)].state; }
  uint64_t evictions() const { return evictions_; }

private:
  struct Slot {
    int64_t key = -1;
    State state = State::Empty;
    int refs = 0;
    bool pinned = false, prefetched = false;
    uint64_t last_use = 0;
  };

  int64_t position(int64_t layer) const {
    if (cycle_position_.empty()) return layer - first_layer_;
    if (layer < 0 || static_cast<size_t>(layer) >= cycle_position_.size()) return -1;
    return cycle_position_[static_cast<size_t>(layer)];
  }
  double value(const Slot& s) const {
    const int64_t layer = s.key / experts_per_layer_, expert = s.key % experts_per_layer_;
    double p = 1.0;
    if (heat_ && layer < heat_->layers())
      p = (heat_->at(layer, expert) + 1.0) / (heat_->layer_total(layer) + static_cast<double>(experts_per_layer_));
    double d = 0;
    if (layer_cycle_ > 0) {
      const int64_t m = position(layer), cur = position(current_layer_);
      d = static_cast<double>(((m - cur - 1) % layer_cycle_ + layer_cycle_) % layer_cycle_);
      if (current_again_) d = m == cur ? 0.0 : d + 1.0;
    }
    return p / (1.0 + d);
  }
  int find_victim(bool demand) const {
    int best = -1, claimable = 0;
    double best_value = 0;
    bool best_empty = false;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.pinned || s.refs > 0 || s.state == State::Loading) continue;
      ++claimable;
      if (!demand && s.prefetched && s.state == State::Ready) continue;
      const bool empty = s.state == State::Empty;
      const double v = empty ? 0 : value(s);
      const uint64_t best_use = best < 0 ? 0 : slots_[static_cast<size_t>(best)].last_use;
      const bool better = best < 0 || (empty && !best_empty) ||
                          (empty == best_empty && (v < best_value || (v == best_value && s.last_use < best_use)));
      if (better) {
        best = static_cast<int>(i);
        best_value = v;
        best_empty = empty;
      }
    }
    if (!demand && claimable <= static_cast<int>(reserve_)) return -1;
    return best;
  }
  Claim claim(int64_t key, int slot, bool demand) {
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
    index_[key] = slot;
    return Claim{Outcome::Claimed, slot, 0, false, 0};
  }

  const HeatHistogram* heat_;
  int64_t experts_per_layer_, first_layer_, layer_cycle_, current_layer_;
  bool current_again_ = false;
  std::vector<int64_t> cycle_position_;
  std::vector<Slot> slots_;
  std::map<int64_t, int> index_;
  size_t reserve_ = 0;
  uint64_t tick_ = 0, evictions_ = 0;
};

// Random traffic of every kind the engine makes (demand and prefetch claims,
// reads landing or failing, releases, forgotten prefetches, pinned claims,
// layer changes with and without slices to come) and heat that moves as the
// engine moves it plus what it never does (tiny adds that round to near-ties,
// decays that round counts together or to zero), through both caches: every
// claim's outcome and slot, every slot's key and state, and the eviction count
// must agree after every step.
void expect_same_decisions(CacheOptions o, HeatHistogram* heat, const std::vector<int64_t>& layers, uint32_t seed) {
  o.heat = heat;
  o.policy = CachePolicyKind::CycleHeat;
  ExpertCache fast(o);
  ScanCache scan(o);
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  std::vector<int> loading, held;
  const size_t slots = o.slots + o.pinned_slots;
  for (int op = 0; op < 3000; ++op) {
    const double r = std::uniform_real_distribution<double>(0, 1)(rng);
    const int64_t key = layers[pick(layers.size())] * o.experts_per_layer +
                        static_cast<int64_t>(pick(static_cast<size_t>(o.experts_per_layer)));
    std::string what;
    if (r < 0.35) {
      const bool demand = chance(0.75);
      // As the streaming source does: a demanded expert enters the heat first.
      if (demand && heat && key / o.experts_per_layer < heat->layers() && chance(0.5))
        heat->add(key / o.experts_per_layer, key % o.experts_per_layer);
      const Claim a = fast.acquire(key, demand), b = scan.acquire(key, demand);
      what = "acquire " + std::to_string(key) + (demand ? " demand" : " prefetch");
      ASSERT_EQ(a.outcome, b.outcome) << "seed " << seed << " op " << op << ": " << what;
      ASSERT_EQ(a.slot, b.slot) << "seed " << seed << " op " << op << ": " << what;
      if (a.outcome == Outcome::Claimed) loading.push_back(a.slot);
      if (demand && a.outcome != Outcome::Full) held.push_back(a.slot);
    } else if (r < 0.50) {
      if (loading.empty()) continue;
      const size_t i = pick(loading.size());
      const bool ok = chance(0.9);
      fast.finish_load(loading[i], ok, ok ? "" : "x");
      scan.finish_load(loading[i], ok);
      what = "finish_load " + std::to_string(loading[i]);
      loading.erase(loading.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (r < 0.65) {
      if (held.empty()) continue;
      const size_t i = pick(held.size());
      fast.release(held[i]);
      scan.release(held[i]);
      what = "release " + std::to_string(held[i]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (r < 0.73) {
      const int64_t layer = layers[pick(layers.size())];
      const bool again = chance(0.2);
      fast.set_current_layer(layer, again);
      scan.set_current_layer(layer, again);
      what = "set_current_layer " + std::to_string(layer);
    } else if (r < 0.78) {
      if (!heat || key / o.experts_per_layer >= heat->layers()) continue;
      static const double amounts[] = {1.0, 1.0, 0.5, 3.0, 1e-13, 1e-300};
      heat->add(key / o.experts_per_layer, key % o.experts_per_layer, amounts[pick(6)]);
      what = "heat add";
    } else if (r < 0.86) {
      if (!heat) continue;
      static const double factors[] = {0.999, 0.5, 0.5, 1e-150, 1e-300};
      heat->decay(factors[pick(5)]);
      what = "heat decay";
    } else if (r < 0.90) {
      fast.forget(key);
      scan.forget(key);
      what = "forget";
    } else if (r < 0.94) {
      const int64_t layer = layers[pick(layers.size())];
      fast.unmark_prefetched(layer);
      scan.unmark_prefetched(layer);
      what = "unmark_prefetched";
    } else {
      const Claim a = fast.acquire_pinned(key), b = scan.acquire_pinned(key);
      ASSERT_EQ(a.outcome, b.outcome) << "seed " << seed << " op " << op << ": acquire_pinned";
      ASSERT_EQ(a.slot, b.slot) << "seed " << seed << " op " << op << ": acquire_pinned";
      if (a.outcome == Outcome::Claimed) loading.push_back(a.slot);
      what = "acquire_pinned";
    }
    for (size_t s = 0; s < slots; ++s) {
      const int slot = static_cast<int>(s);
      ASSERT_EQ(fast.key(slot), scan.key(slot)) << "seed " << seed << " op " << op << " (" << what << "): slot " << s;
      ASSERT_EQ(fast.state(slot), scan.state(slot)) << "seed " << seed << " op " << op << ": slot " << s;
    }
    ASSERT_EQ(fast.evictions(), scan.evictions()) << "seed " << seed << " op " << op;
  }
}

CacheOptions scan_options() {
  CacheOptions o;
  o.record_bytes = 1;
  o.buffers = false;
  o.slots = 6;
  o.pinned_slots = 2;
  o.prefetch_reserve = 2;
  o.experts_per_layer = 5;
  return o;
}

TEST(CachePolicy, CycleHeatDecidesAsTheScanBefore) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    // MoE layers 1, 2, 4 (not contiguous), a layer 3 off the cycle, layer 6 beyond the heat.
    CacheOptions o = scan_options();
    o.cycle_layers = {1, 2, 4};
    HeatHistogram heat(6, 5);
    expect_same_decisions(o, &heat, {1, 2, 3, 4, 6}, seed);
    // The contiguous form of the cycle, and no heat at all.
    CacheOptions c = scan_options();
    c.first_layer = 1;
    c.layer_cycle = 3;
    HeatHistogram heat2(4, 5);
    expect_same_decisions(c, &heat2, {1, 2, 3}, seed + 100);
    expect_same_decisions(c, nullptr, {1, 2, 3}, seed + 200);
  }
}

// The policies through their interface, on cases small enough to follow: two
// or three MoE layers of 4 experts (key = 4 * layer + expert), every key
// evictable unless the case says otherwise.
CachePolicyShape shape(std::vector<int64_t> cycle, const HeatHistogram* heat = nullptr, int64_t top_k = 1) {
  CachePolicyShape s;
  s.experts_per_layer = 4;
  s.top_k = top_k;
  s.cycle_layers = std::move(cycle);
  s.heat = heat;
  return s;
}

int64_t victim(CachePolicy& p) {
  return p.victim([](int64_t) { return true; }, true);
}

// The order in which the keys would go: each victim in turn, erased (as the
// cache erases a key when it reuses its slot).
std::vector<int64_t> victims(CachePolicy& p) {
  std::vector<int64_t> out;
  for (int64_t k; (k = victim(p)) >= 0;) {
    out.push_back(k);
    p.erase(k);
  }
  return out;
}

// A key the layer being computed holds is never offered: the cache passes
// it over (a held key became held through a use, which the policy saw).
int64_t victim_passing_over(CachePolicy& p, int64_t held) {
  return p.victim([held](int64_t k) { return k != held; }, false);
}

// LRU ignores layers and heat: A0 (key 0) used at ticks 1 and 4, B1 (key 5)
// at 2, A2 (key 2) at 3: B1 goes, then A2; held keys are passed over.
TEST(CachePolicy, LruEvictsTheLeastRecentlyUsedOfAnyLayer) {
  auto p = make_cache_policy(CachePolicyKind::Lru, shape({0, 1}));
  p->set_current_layer(0, false);
  p->insert(0, 1, true);
  p->insert(5, 2, true);
  p->insert(2, 3, true);
  p->touch(0, 4);
  EXPECT_EQ(victim(*p), 5);
  p->erase(5);
  p->insert(7, 5, true);  // B3
  EXPECT_EQ(victim_passing_over(*p, 2), 0);  // A2 held: the next oldest
  EXPECT_EQ(victims(*p), (std::vector<int64_t>{2, 0, 7}));
  // cycle-heat on the same uses (no heat: p = 1; current layer 0, so layer
  // 1 comes next, d = 0, and layer 0 is furthest, d = 1): A2 (1/2, tick 3)
  // before A0 (1/2, tick 4) before B3 (1/1).
  auto c = make_cache_policy(CachePolicyKind::CycleHeat, shape({0, 1}));
  c->set_current_layer(0, false);
  c->insert(0, 1, true);
  c->insert(5, 2, true);
  c->insert(2, 3, true);
  c->touch(0, 4);
  EXPECT_EQ(victim(*c), 2);
  c->erase(2);
  EXPECT_EQ(victim(*c), 0);
}

// frequency: the lowest heat count of any layer, ties to the least recent
// use. Counts A0 3, B1 5, A2 1, B3 0 (never used): A2 goes although it was
// used last (LRU would take A0), then B3 as soon as it is in.
TEST(CachePolicy, FrequencyEvictsTheLowestHeatCount) {
  HeatHistogram heat(2, 4);
  heat.add(0, 0, 3.0);
  heat.add(1, 1, 5.0);
  heat.add(0, 2, 1.0);
  auto p = make_cache_policy(CachePolicyKind::Frequency, shape({0, 1}, &heat));
  p->set_current_layer(0, false);
  p->insert(0, 1, true);
  p->insert(5, 2, true);
  p->insert(2, 3, true);
  EXPECT_EQ(victim(*p), 2);
  p->erase(2);
  p->insert(7, 4, true);
  EXPECT_EQ(victim(*p), 7);
  // The heat moves: B3 gets 4, A0 2 more (5, tying B1 at 5): now A0 and B1
  // tie at 5, B3 has 4: B3 goes; held, the tie goes to A0 (tick 1, before 2).
  heat.add(1, 3, 4.0);
  heat.add(0, 0, 2.0);
  EXPECT_EQ(victim(*p), 7);
  EXPECT_EQ(victim_passing_over(*p, 7), 0);
  // A decay keeps the order (every count halves).
  heat.decay(0.5);
  EXPECT_EQ(victims(*p), (std::vector<int64_t>{7, 0, 5}));
}

// cycle-reuse: three MoE layers (C = 3), K = 1, no heat (q0 = K / E = 1/4
// for every expert). Token 1 routes A0, B2, C0; token 2 A0, B1, C0; token 3
// is at layer 0 (A), routing A0 again. A layer learns from its last visit
// when the next one starts, so only A has learned anything (from tokens 1
// and 2): at its second visit, A0 (never used before) came as one of K = 1
// expected uses of the old bucket: uses[old] = 1, expected[old] = 1; at its
// third, A0 came back at age 1, where the heat expected 1/4: uses[1] = 1,
// expected[1] = 1/4 (the rest, 3/4, expected in the old bucket, which got
// nothing: uses[old] = 0.98, expected[old] = 0.98 + 0.75).
//   A0: age 1, lift (1 + 1) / (1/4 + 1) = 1.6, q = 0.4; d = 2 (just
//       computed): D = 2 + 3 (1/0.4 - 1) = 6.5
//   B2: age 2, B1: age 1, C0: age 1; their layers have no data: lift 1,
//       q = 1/4; d(B) = 0: D = 0 + 3 (4 - 1) = 9; d(C) = 1: D = 10
// The largest D goes first: C0, B2 and B1 (a tie: B2 used longer ago), then
// A0. Without the lift (q = q0) A0 would have D = 11 and go first, as
// cycle-heat (p = 1 without heat) drops it first, 1 / (1 + 2) being the
// lowest value: the expert used on every token, because its layer was just
// computed.
TEST(CachePolicy, CycleReuseEvictsTheLongestExpectedWait) {
  auto p = make_cache_policy(CachePolicyKind::CycleReuse, shape({0, 1, 2}));
  auto h = make_cache_policy(CachePolicyKind::CycleHeat, shape({0, 1, 2}));
  for (CachePolicy* c : {p.get(), h.get()}) {
    c->set_current_layer(0, false);
    c->insert(0, 1, true);  // A0
    c->set_current_layer(1, false);
    c->insert(6, 2, true);  // B2
    c->set_current_layer(2, false);
    c->insert(8, 3, true);  // C0
    c->set_current_layer(0, false);
    c->touch(0, 4);
    c->set_current_layer(1, false);
    c->insert(5, 5, true);  // B1
    c->set_current_layer(2, false);
    c->touch(8, 6);
    c->set_current_layer(0, false);
    c->touch(0, 7);
  }
  EXPECT_EQ(victims(*p), (std::vector<int64_t>{8, 6, 5, 0}));
  EXPECT_EQ(victim(*h), 0);
}

// A prefetch claim is not a use. Two MoE layers (C = 2), K = 1, no heat:
// layer 0 routes A0 on three visits, and A1 is read ahead at the third;
// then layer 1's first visit routes B0. Layer 0 has learned (as above):
// uses[1] = 1, expected[1] = 1/4, uses[old] = 0.98, expected[old] = 1.73.
//   A0: age 1, lift 1.6, q = 0.4; d = 0 (next): D = 0 + 2 (2.5 - 1) = 3
//   A1: never used, lift (0.98 + 1) / (1.73 + 1) = 0.7253, q = 0.1813:
//       D = 0 + 2 (5.515 - 1) = 9.03
//   B0: age 1, no data, q = 1/4; d = 1: D = 1 + 2 (4 - 1) = 7
// A1 goes, then B0, then A0. Counted as a use, A1 would be at age 1 like
// A0 (D = 3) and B0 would go first.
TEST(CachePolicy, CycleReuseCountsNoPrefetchAsAUse) {
  auto p = make_cache_policy(CachePolicyKind::CycleReuse, shape({0, 1}));
  p->set_current_layer(0, false);
  p->insert(0, 1, true);
  p->set_current_layer(0, false);
  p->touch(0, 2);
  p->set_current_layer(0, false);
  p->touch(0, 3);
  p->insert(1, 4, false);
  p->set_current_layer(1, false);
  p->insert(4, 5, true);
  EXPECT_EQ(victims(*p), (std::vector<int64_t>{1, 4, 0}));
}

// A layer asked for in slices (again = true until its last slice) is one
// visit: its ages and what it learns move once. The same routes asked for
// in one request and in two slices give the same victims, token after
// token; taking the second slice for a new visit gives others.
TEST(CachePolicy, CycleReuseCountsASlicedLayerAsOneVisit) {
  auto run = [](int slicing) {  // 0: one request, 1: two slices, 2: two visits
    auto p = make_cache_policy(CachePolicyKind::CycleReuse, shape({0, 1}));
    std::mt19937 rng(5);
    std::vector<int64_t> out;
    uint64_t tick = 0;
    std::set<int64_t> in;
    for (int token = 0; token < 40; ++token) {
      for (int64_t layer : {0, 1}) {
        const int64_t a = static_cast<int64_t>(rng() % 4), b = (a + 1 + static_cast<int64_t>(rng() % 3)) % 4;
        const int64_t ka = 4 * layer + a, kb = 4 * layer + b;
        p->set_current_layer(layer, layer == 1 && slicing == 1);
        if (in.count(ka)) p->touch(ka, ++tick);
        else p->insert(ka, ++tick, true), in.insert(ka);
        if (layer == 1 && slicing > 0) p->set_current_layer(layer, false);
        if (in.count(kb)) p->touch(kb, ++tick);
        else p->insert(kb, ++tick, true), in.insert(kb);
        // Three keys stay: evict down to them, the layer's own two held.
        while (in.size() > 3) {
          const int64_t v = p->victim([&](int64_t k) { return k != ka && k != kb; }, true);
          out.push_back(v);
          p->erase(v);
          in.erase(v);
        }
      }
    }
    return out;
  };
  const std::vector<int64_t> once = run(0);
  EXPECT_EQ(run(1), once);
  EXPECT_NE(run(2), once);
}

TEST(CachePolicy, UnknownNamesAreRefusedNamingTheOption) {
  EXPECT_EQ(parse_cache_policy("cycle-reuse", "--cache-policy"), CachePolicyKind::CycleReuse);
  try {
    parse_cache_policy("belady", "--cache-policy");
    FAIL() << "belady is not a policy the engine can run";
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(),
                 "--cache-policy: \"belady\" is not a cache policy (cycle-heat, lru, frequency, cycle-reuse)");
  }
  for (const std::string& n : cache_policy_names()) EXPECT_EQ(cache_policy_name(parse_cache_policy(n, "x")), n);
}

// The engine's cache runs the policy it is given: the LRU case above through
// ExpertCache (slots in claim order, no empty slot left).
TEST(CachePolicy, TheCacheAsksItsPolicy) {
  CacheOptions o;
  o.record_bytes = 1;
  o.buffers = false;
  o.slots = 3;
  o.experts_per_layer = 4;
  o.cycle_layers = {0, 1};
  for (CachePolicyKind kind : {CachePolicyKind::Lru, CachePolicyKind::CycleHeat}) {
    o.policy = kind;
    ExpertCache c(o);
    EXPECT_EQ(c.policy_name(), cache_policy_name(kind));
    EXPECT_EQ(c.data(0), nullptr);  // no buffers
    c.set_current_layer(0, false);
    for (int64_t k : {0, 5, 2, 0, 7}) {  // A0, B1, A2, A0 again (a hit), B3 (a miss: evicts)
      const Claim cl = c.acquire(k, true);
      if (cl.outcome == Outcome::Claimed) c.finish_load(cl.slot, true, "");
      c.release(cl.slot);
    }
    // LRU drops B1; cycle-heat (current layer 0) drops A2, the older of layer 0's.
    EXPECT_EQ(c.contains(5), kind == CachePolicyKind::CycleHeat) << cache_policy_name(kind);
    EXPECT_EQ(c.contains(2), kind == CachePolicyKind::Lru) << cache_policy_name(kind);
    EXPECT_TRUE(c.contains(0) && c.contains(7));
  }
}

// --cache-policy auto's rule, by hand: 16 of 512 experts is 1/32 chance, so
// the line is 2.2 / 32 = 6.875 % reuse, over at least 2000 routed experts.
TEST(CachePolicy, AutoPicksCycleReuseAboveTheReuseLine) {
  auto pick = [](double reused, double routed) {
    HeatHistogram h(2, 512);
    h.add_reuse(reused, routed);
    return choose_cache_policy(&h, 16, 512);
  };
  EXPECT_EQ(choose_cache_policy(nullptr, 16, 512).kind, CachePolicyKind::CycleHeat);
  EXPECT_EQ(pick(1999, 1999).kind, CachePolicyKind::CycleHeat) << "too little measured";
  EXPECT_NE(pick(1999, 1999).why.find("too little"), std::string::npos);
  EXPECT_EQ(pick(275, 4000).kind, CachePolicyKind::CycleReuse) << "6.875 %: on the line";
  EXPECT_EQ(pick(274, 4000).kind, CachePolicyKind::CycleHeat) << "6.85 %";
  const AutoPolicyChoice c = pick(400, 4000);
  EXPECT_EQ(c.kind, CachePolicyKind::CycleReuse);
  EXPECT_EQ(c.why, "temporal reuse 10.0 % = 3.2x chance");
}

// Reuse counted by hand: layer 1 routes {1,2,3} then {2,3,4} (2 of 3 again),
// then {7,8,9} (0 of 3); a prompt breaks the chain, so {2,3,4} after it adds
// nothing; layer 2's first route has no predecessor.
TEST(CachePolicy, ReuseTrackerCountsWhatTheTokenBeforeRouted) {
  HeatHistogram h(3, 10);
  ReuseTracker t(3);
  const std::vector<int64_t> a{1, 2, 3}, b{2, 3, 4}, c{7, 8, 9};
  t.decoded(1, a, h);
  EXPECT_EQ(h.routed(), 0);
  t.decoded(1, b, h);
  t.decoded(2, c, h);
  EXPECT_EQ(h.reused(), 2);
  EXPECT_EQ(h.routed(), 3);
  t.decoded(1, c, h);
  EXPECT_EQ(h.reused(), 2);
  EXPECT_EQ(h.routed(), 6);
  t.break_chain();
  t.decoded(1, b, h);
  EXPECT_EQ(h.routed(), 6);
  h.decay(0.5);
  EXPECT_EQ(h.reused(), 1);
  EXPECT_EQ(h.routed(), 3);
}

}  // namespace cache_policy_test
}  // namespace deltafin
