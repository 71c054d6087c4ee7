#include "experts/cache_policy.h"

#include <cstdio>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "util/error.h"

namespace deltafin {

const std::vector<std::string>& cache_policy_names() {
  static const std::vector<std::string> names = {"cycle-heat", "lru", "frequency", "cycle-reuse"};
  return names;
}

std::string cache_policy_name(CachePolicyKind kind) {
  switch (kind) {
    case CachePolicyKind::Lru: return "lru";
    case CachePolicyKind::Frequency: return "frequency";
    case CachePolicyKind::CycleHeat: return "cycle-heat";
    case CachePolicyKind::CycleReuse: return "cycle-reuse";
  }
  return "?";
}

const std::vector<std::string>& cache_policy_options() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {"auto"};
    for (const std::string& n : cache_policy_names()) v.push_back(n);
    return v;
  }();
  return names;
}

AutoPolicyChoice choose_cache_policy(const HeatHistogram* heat, int64_t top_k, int64_t experts) {
  AutoPolicyChoice c;
  const double routed = heat ? heat->routed() : 0;
  if (routed < kAutoMinRouted) {
    c.why = "too little decoding measured yet for temporal reuse";
    return c;
  }
  const double reuse = heat->reused() / routed;
  const double chance = static_cast<double>(top_k) / static_cast<double>(experts);
  const double ratio = reuse / chance;
  char buf[160];
  std::snprintf(buf, sizeof buf, "temporal reuse %.1f %% = %.1fx chance", 100 * reuse, ratio);
  c.why = buf;
  if (ratio >= kAutoReuseOverChance) c.kind = CachePolicyKind::CycleReuse;
  return c;
}

CachePolicyKind parse_cache_policy(const std::string& name, const std::string& where) {
  for (CachePolicyKind k : {CachePolicyKind::Lru, CachePolicyKind::Frequency, CachePolicyKind::CycleHeat,
                            CachePolicyKind::CycleReuse})
    if (cache_policy_name(k) == name) return k;
  std::string list;
  for (const std::string& n : cache_policy_names()) list += (list.empty() ? "" : ", ") + n;
  fail(where, ": \"", name, "\" is not a cache policy (", list, ")");
}

namespace {

// The MoE layers a pass visits in order, and how far each is from coming
// round again (expert_cache.h: the d of p / (1 + d)).
class LayerCycle {
public:
  explicit LayerCycle(const CachePolicyShape& s)
      : first_(s.first_layer), cycle_(s.layer_cycle < 0 ? 0 : s.layer_cycle), current_(s.first_layer) {
    if (s.cycle_layers.empty()) return;
    cycle_ = static_cast<int64_t>(s.cycle_layers.size());
    for (size_t i = 0; i < s.cycle_layers.size(); ++i) {
      const int64_t l = s.cycle_layers[i];
      if (l < 0 || (i && l <= s.cycle_layers[i - 1])) fail("expert cache: cycle layers must rise from 0");
      position_.resize(static_cast<size_t>(l) + 1, -1);
      position_[static_cast<size_t>(l)] = static_cast<int64_t>(i);
    }
    current_ = s.cycle_layers.front();
  }

  void set_current(int64_t layer, bool again) {
    current_ = layer;
    again_ = again;
  }
  int64_t current() const { return current_; }
  int64_t length() const { return cycle_; }

  // MoE layers until `layer` comes round again: 0 = the next one to be
  // computed; the layer just computed is furthest. While the current layer
  // has slices to come it comes again first (0), every other layer one further.
  double distance(int64_t layer) const {
    if (cycle_ <= 0) return 0;
    const int64_t m = position(layer), cur = position(current_);
    // ((m - cur - 1) mod cycle), without a division for places on the cycle.
    int64_t r = m - cur - 1;
    if (r < -cycle_ || r >= cycle_) r %= cycle_;
    if (r < 0) r += cycle_;
    double d = static_cast<double>(r);
    if (again_) d = m == cur ? 0.0 : d + 1.0;
    return d;
  }

private:
  int64_t position(int64_t layer) const {
    if (position_.empty()) return layer - first_;
    return layer >= 0 && static_cast<size_t>(layer) < position_.size() ? position_[static_cast<size_t>(layer)] : -1;
  }

  int64_t first_, cycle_, current_;
  bool again_ = false;
  std::vector<int64_t> position_;  // layer -> its place in the cycle (cycle_layers given), -1 off it
};

// When a layer's scores may have changed: the heat's version of the layer
// and a policy's own.
struct Stamp {
  uint64_t heat = 0, own = 0;
  bool operator==(const Stamp&) const = default;
};

// The heat count of a key; 0 without heat or for a layer it does not cover.
class HeatReader {
public:
  explicit HeatReader(const HeatHistogram* heat) : heat_(heat) {}
  bool covers(int64_t layer) const { return heat_ && layer < heat_->layers(); }
  double count(int64_t layer, int64_t expert) const { return covers(layer) ? heat_->at(layer, expert) : 0.0; }
  double total(int64_t layer) const { return heat_->layer_total(layer); }
  uint64_t version(int64_t layer) const { return covers(layer) ? heat_->layer_version(layer) : 0; }
  uint64_t add_version(int64_t layer) const { return covers(layer) ? heat_->layer_add_version(layer) : 0; }

private:
  const HeatHistogram* heat_;
};

// How a policy ranks keys, for OrderedPolicy: a key's score within its layer,
// the value compared across layers (never decreasing as the score grows), and
// what it learns from the current layer and from demands. Two stamps: one
// that changes whenever a score of the layer may have (value_stamp), and one
// that changes whenever their order may have (order_stamp; a heat decay keeps
// the order of counts, so the heat's policies leave it out).
struct Rank {
  void set_current_layer(int64_t, bool) {}
  void used(int64_t) {}
};

class LruRank : public Rank {
public:
  explicit LruRank(const CachePolicyShape&) {}
  double score(int64_t, int64_t) const { return 0; }
  double value(int64_t, double) const { return 0; }
  Stamp order_stamp(int64_t) const { return {}; }
  Stamp value_stamp(int64_t) const { return {}; }
};

class FrequencyRank : public Rank {
public:
  explicit FrequencyRank(const CachePolicyShape& s) : heat_(s.heat) {}
  double score(int64_t layer, int64_t expert) const { return heat_.count(layer, expert); }
  double value(int64_t, double h) const { return h; }
  Stamp order_stamp(int64_t layer) const { return {heat_.add_version(layer), 0}; }
  Stamp value_stamp(int64_t layer) const { return {heat_.version(layer), 0}; }

private:
  HeatReader heat_;
};

// p / (1 + d), exactly as the cache computed it in one scan before policies
// were separate: the same expression, so the same bits and the same victims.
class CycleHeatRank : public Rank {
public:
  explicit CycleHeatRank(const CachePolicyShape& s)
      : heat_(s.heat), cycle_(s), experts_(static_cast<double>(s.experts_per_layer < 1 ? 1 : s.experts_per_layer)) {}
  void set_current_layer(int64_t layer, bool again) { cycle_.set_current(layer, again); }
  double score(int64_t layer, int64_t expert) const { return heat_.count(layer, expert); }
  double value(int64_t layer, double h) const {
    double p = 1.0;
    if (heat_.covers(layer)) p = (h + 1.0) / (heat_.total(layer) + experts_);
    return p / (1.0 + cycle_.distance(layer));
  }
  Stamp order_stamp(int64_t layer) const { return {heat_.add_version(layer), 0}; }
  Stamp value_stamp(int64_t layer) const { return {heat_.version(layer), 0}; }

private:
  HeatReader heat_;
  LayerCycle cycle_;
  double experts_;
};

// -(d + C (1/q - 1)): see the header.
class CycleReuseRank : public Rank {
public:
  explicit CycleReuseRank(const CachePolicyShape& s)
      : heat_(s.heat),
        cycle_(s),
        e_(s.experts_per_layer < 1 ? 1 : s.experts_per_layer),
        k_(static_cast<double>(s.top_k < 1 ? 1 : s.top_k)) {}

  // A visit of a layer is a run of calls for it; a sliced layer's calls
  // (again = true until its last slice) are one visit. A new visit first
  // learns from the layer's last one.
  void set_current_layer(int64_t layer, bool again) {
    const bool same_visit = layer == cycle_.current() && again_;
    cycle_.set_current(layer, again);
    again_ = again;
    if (same_visit) return;
    Layer& l = stats(layer);
    if (l.count > 0) learn(layer, l);
    ++l.count;
    l.version = ++versions_;
  }

  // A demand of `key` while its layer is computed counts once per visit.
  void used(int64_t key) {
    const int64_t layer = key / e_;
    if (key < 0 || layer != cycle_.current()) return;
    Layer& l = stats(layer);
    if (static_cast<size_t>(key) >= uses_.size()) uses_.resize(static_cast<size_t>(key) + 1);
    Uses& u = uses_[static_cast<size_t>(key)];
    if (u.visit == l.count) return;
    u.before = u.visit;
    u.visit = l.count;
    l.now.push_back(key);
  }

  double score(int64_t layer, int64_t expert) const {
    const size_t key = static_cast<size_t>(layer * e_ + expert);
    const Layer* l = static_cast<size_t>(layer) < layers_.size() ? &layers_[static_cast<size_t>(layer)] : nullptr;
    // The key's age at the layer's next visit: 1 = used at the last (or this) one.
    size_t age = kReuseAges;
    if (l && key < uses_.size() && uses_[key].visit > 0)
      age = static_cast<size_t>(std::min<int64_t>(l->count + 1 - uses_[key].visit, static_cast<int64_t>(kReuseAges)));
    const double lift = l ? (l->uses[age] + 1.0) / (l->expected[age] + 1.0) : 1.0;
    return std::min(1.0, prior(layer, expert) * lift);
  }
  double value(int64_t layer, double q) const {
    const double c = static_cast<double>(std::max<int64_t>(cycle_.length(), 1));
    return -(cycle_.distance(layer) + c * (1.0 / q - 1.0));
  }
  // A visit moves every key's age and the layer's lifts, and a heat decay
  // moves q0 by amounts that differ by key: either may reorder the layer.
  Stamp order_stamp(int64_t layer) const {
    const uint64_t own = static_cast<size_t>(layer) < layers_.size() ? layers_[static_cast<size_t>(layer)].version : 0;
    return {heat_.version(layer), own};
  }
  Stamp value_stamp(int64_t layer) const { return order_stamp(layer); }

private:
  // Ages 1 .. kReuseAges - 1 by the visit, then one bucket for older or never.
  struct Layer {
    int64_t count = 0;  // visits so far; the current (or last) one is `count`
    uint64_t version = 0;
    std::vector<int64_t> now;                         // keys used at visit `count`
    std::array<std::vector<int64_t>, kReuseAges - 1> past;  // [a - 1]: keys used at visit count - a
    // Per age: the uses seen, and the uses expected from the heat alone (the
    // sum of q0 over the keys of that age at each visit), both decayed.
    std::array<double, kReuseAges + 1> uses{}, expected{};
  };
  struct Uses {
    int64_t visit = 0, before = 0;  // the visit of its last use and of the one before (0: none)
  };

  Layer& stats(int64_t layer) {
    if (static_cast<size_t>(layer) >= layers_.size()) layers_.resize(static_cast<size_t>(layer) + 1);
    return layers_[static_cast<size_t>(layer)];
  }

  double prior(int64_t layer, int64_t expert) const {
    const double e = static_cast<double>(e_);
    if (!heat_.covers(layer)) return std::min(1.0, k_ / e);
    return std::min(1.0, k_ * (heat_.count(layer, expert) + 1.0) / (heat_.total(layer) + e));
  }

  // Visit t = l.count is over, its uses in l.now: for each age a, the keys
  // last used a visits before it were expected to come back sum(q0) times and
  // came back as often as they did. The keys of no recent use (older, never,
  // and pinned ones, which the policy does not see) take the rest: K expected
  // uses in all.
  void learn(int64_t layer, Layer& l) {
    const int64_t t = l.count;
    std::array<double, kReuseAges + 1> seen{}, expect{};
    for (int64_t key : l.now) {
      const Uses& u = uses_[static_cast<size_t>(key)];
      const int64_t age = u.before > 0 ? std::min<int64_t>(t - u.before, static_cast<int64_t>(kReuseAges)) : kReuseAges;
      seen[static_cast<size_t>(age)] += 1;
    }
    double recent = 0;
    for (size_t a = 1; a < kReuseAges; ++a)
      for (int64_t key : l.past[a - 1]) {
        const Uses& u = uses_[static_cast<size_t>(key)];
        const int64_t last = u.visit == t ? u.before : u.visit;  // its last use before visit t
        if (last != t - static_cast<int64_t>(a)) continue;      // used again since
        expect[a] += prior(layer, key % e_);
      }
    for (size_t a = 1; a < kReuseAges; ++a) recent += expect[a];
    expect[kReuseAges] = std::max(0.0, k_ - recent);
    for (size_t a = 1; a <= kReuseAges; ++a) {
      l.uses[a] = kReuseStatsDecay * l.uses[a] + seen[a];
      l.expected[a] = kReuseStatsDecay * l.expected[a] + expect[a];
    }
    for (size_t a = l.past.size() - 1; a > 0; --a) l.past[a].swap(l.past[a - 1]);
    l.past[0].swap(l.now);
    l.now.clear();
  }

  HeatReader heat_;
  LayerCycle cycle_;
  int64_t e_;
  double k_;
  bool again_ = false;
  std::vector<Layer> layers_;
  std::vector<Uses> uses_;
  uint64_t versions_ = 0;
};

// The keys in evictable slots, kept per layer in the order of their score
// within the layer, from which the value compared across layers follows. A
// victim query is then one look per layer instead of a scan of every slot:
// the layer's first evictable key, then the least recent use among keys
// whose value rounds to the same. A layer is reordered when its stamp
// changes (the heat added to it or decayed), and when keys were used since
// (they wait in `fresh`, compared one by one, while the layer is current).
template <class R>
class OrderedPolicy final : public CachePolicy {
public:
  explicit OrderedPolicy(const CachePolicyShape& s)
      : rank_(s), e_(s.experts_per_layer < 1 ? 1 : s.experts_per_layer) {}

  void set_current_layer(int64_t layer, bool again) override {
    rank_.set_current_layer(layer, again);
    current_ = layer;
    ++epoch_;  // every value may change with the cycle distance
  }

  void insert(int64_t key, uint64_t tick, bool demand) override {
    grow(key);
    if (where_[static_cast<size_t>(key)] != kAbsent) return touch(key, tick);
    if (demand) rank_.used(key);
    last_use_[static_cast<size_t>(key)] = tick;
    where_[static_cast<size_t>(key)] = kFresh;
    layers_[static_cast<size_t>(key / e_)].fresh.push_back(key);
  }

  void touch(int64_t key, uint64_t tick) override {
    if (key < 0 || static_cast<size_t>(key) >= where_.size() || where_[static_cast<size_t>(key)] == kAbsent) return;
    rank_.used(key);
    last_use_[static_cast<size_t>(key)] = tick;
    Layer& l = layers_[static_cast<size_t>(key / e_)];
    int32_t& w = where_[static_cast<size_t>(key)];
    if (w == kFresh) return;
    l.order[static_cast<size_t>(w)].key = -1;
    ++l.holes;
    w = kFresh;
    l.fresh.push_back(key);
    l.known_kind = -1;
  }

  void erase(int64_t key) override {
    if (key < 0 || static_cast<size_t>(key) >= where_.size()) return;
    int32_t& w = where_[static_cast<size_t>(key)];
    if (w == kAbsent) return;
    Layer& l = layers_[static_cast<size_t>(key / e_)];
    if (w == kFresh) {
      auto it = std::find(l.fresh.begin(), l.fresh.end(), key);
      *it = l.fresh.back();
      l.fresh.pop_back();
    } else {
      l.order[static_cast<size_t>(w)].key = -1;
      ++l.holes;
      l.known_kind = -1;
    }
    w = kAbsent;
  }

  int64_t victim(FunctionRef<bool(int64_t)> evictable, bool demand) override {
    const int kind = demand ? 1 : 0;
    Best best;
    for (size_t li = 0; li < layers_.size(); ++li) {
      Layer& l = layers_[li];
      if (l.order.size() == l.holes && l.fresh.empty()) continue;
      const int64_t layer = static_cast<int64_t>(li);
      if (!l.stamped || !(l.stamp == rank_.order_stamp(layer)) || (!l.fresh.empty() && layer != current_) ||
          l.fresh.size() > kFreshLimit || l.holes * 2 > l.order.size())
        reorder(layer);
      const Stamp values = rank_.value_stamp(layer);
      if (l.known_kind != kind || l.known_epoch != epoch_ || !(l.known_values == values)) {
        bool skipped = false;
        l.known = order_best(layer, evictable, &skipped);
        l.known_kind = skipped ? -1 : kind;
        l.known_epoch = epoch_;
        l.known_values = values;
      }
      Best b = l.known;
      for (int64_t k : l.fresh)
        if (evictable(k))
          b.consider({true, rank_.value(layer, rank_.score(layer, k % e_)), last_use_[static_cast<size_t>(k)], k});
      best.consider(b);
    }
    return best.found ? best.key : -1;
  }

private:
  static constexpr int32_t kAbsent = -1, kFresh = -2;
  // Keys used since the layer was ordered are compared one by one while their
  // layer is the current one (they are mostly held by it), up to this many.
  static constexpr size_t kFreshLimit = 32;

  struct Entry {
    double score;
    uint64_t last_use;
    int64_t key;  // -1: left or used since the layer was ordered (a hole)
  };
  struct Best {
    bool found = false;
    double value = 0;
    uint64_t last_use = 0;
    int64_t key = -1;
    void consider(const Best& o) {
      if (o.found && (!found || o.value < value || (o.value == value && o.last_use < last_use))) *this = o;
    }
  };
  struct Layer {
    std::vector<Entry> order;    // by (score, last use) as of `stamp`
    std::vector<uint32_t> next;  // [i]: the first entry of order after i with a higher score
    std::vector<int64_t> fresh;  // used or inserted since
    Stamp stamp;                 // the order stamp as of the last reorder
    Stamp scored;                // the value stamp as of the last rescore
    bool stamped = false;
    size_t holes = 0;
    // order's best as last found, for queries of this kind (1 demand, 0
    // prefetch; -1 none) while the current layer is unchanged: kept only when
    // no entry was passed over as not evictable (one that becomes evictable
    // later would be missed), and dropped when the order changes (an entry
    // becomes unevictable only through a use or a claim, which do).
    Best known;
    int known_kind = -1;
    uint64_t known_epoch = 0;
    Stamp known_values;
  };

  void grow(int64_t key) {
    if (key < 0) fail("expert cache: negative key ", key);
    if (static_cast<size_t>(key) >= where_.size()) {
      where_.resize(static_cast<size_t>(key) + 1, kAbsent);
      last_use_.resize(static_cast<size_t>(key) + 1, 0);
    }
    if (static_cast<size_t>(key / e_) >= layers_.size()) layers_.resize(static_cast<size_t>(key / e_) + 1);
  }

  static bool before(const Entry& a, const Entry& b) {
    return a.score < b.score || (a.score == b.score && a.last_use < b.last_use);
  }

  // Folds the fresh keys in and drops the holes; rescores every key when a
  // score may have changed since the last rescore (fresh keys are scored now:
  // merging them with stale scores would misplace them).
  void reorder(int64_t layer) {
    Layer& l = layers_[static_cast<size_t>(layer)];
    const Stamp now = rank_.order_stamp(layer), values = rank_.value_stamp(layer);
    const bool rescore = !l.stamped || !(l.scored == values);
    scratch_.clear();
    for (const Entry& e : l.order) {
      if (e.key < 0) continue;
      scratch_.push_back(e);
      if (rescore) scratch_.back().score = rank_.score(layer, e.key % e_);
    }
    if (rescore && !std::is_sorted(scratch_.begin(), scratch_.end(), before))
      std::sort(scratch_.begin(), scratch_.end(), before);
    const size_t old = scratch_.size();
    for (int64_t k : l.fresh) scratch_.push_back({rank_.score(layer, k % e_), last_use_[static_cast<size_t>(k)], k});
    std::sort(scratch_.begin() + static_cast<std::ptrdiff_t>(old), scratch_.end(), before);
    std::inplace_merge(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(old), scratch_.end(), before);
    l.order.swap(scratch_);
    for (size_t i = 0; i < l.order.size(); ++i) where_[static_cast<size_t>(l.order[i].key)] = static_cast<int32_t>(i);
    l.next.resize(l.order.size());
    for (size_t i = l.order.size(); i-- > 0;)
      l.next[i] = i + 1 == l.order.size() || l.order[i + 1].score != l.order[i].score ? static_cast<uint32_t>(i + 1)
                                                                                      : l.next[i + 1];
    l.fresh.clear();
    l.holes = 0;
    l.stamp = now;
    l.scored = values;
    l.stamped = true;
    l.known_kind = -1;
  }

  // The lowest (value, last use) among the evictable keys of the layer's
  // order; *skipped: a live entry was passed over as not evictable. Values
  // come from the scores as they are now: the stored ones keep the order,
  // but a decay since the reorder may have moved them.
  Best order_best(int64_t layer, FunctionRef<bool(int64_t)> evictable, bool* skipped) const {
    const Layer& l = layers_[static_cast<size_t>(layer)];
    const std::vector<Entry>& o = l.order;
    auto usable = [&](size_t i) {
      if (o[i].key < 0) return false;
      if (evictable(o[i].key)) return true;
      *skipped = true;
      return false;
    };
    Best b;
    size_t i = 0;
    while (i < o.size() && !usable(i)) ++i;
    if (i == o.size()) return b;
    auto value_of = [&](size_t k) { return rank_.value(layer, rank_.score(layer, o[k].key % e_)); };
    b = {true, value_of(i), o[i].last_use, o[i].key};
    // Keys of the same stored score come later in use order and cannot win;
    // a higher one can only tie when its value rounds to the same double (a
    // hole keeps its place and stored score, and holds no key to read).
    for (size_t j = l.next[i]; j < o.size(); j = l.next[j]) {
      const std::optional<double> v = live_value(layer, o, j);
      if (!v) continue;            // a run of holes
      if (*v != b.value) break;    // higher, and so is every run after it
      for (size_t k = j; k < l.next[j]; ++k)
        if (usable(k)) {
          if (o[k].last_use < b.last_use) b.last_use = o[k].last_use, b.key = o[k].key;
          break;
        }
    }
    return b;
  }

  // The value now of the run of equal stored scores at j (one value: their
  // counts have had the same decays since), or none for a run of holes.
  std::optional<double> live_value(int64_t layer, const std::vector<Entry>& o, size_t j) const {
    const size_t end = layers_[static_cast<size_t>(layer)].next[j];
    for (size_t k = j; k < end; ++k)
      if (o[k].key >= 0) return rank_.value(layer, rank_.score(layer, o[k].key % e_));
    return std::nullopt;
  }

  R rank_;
  int64_t e_;
  int64_t current_ = -1;
  uint64_t epoch_ = 0;
  std::vector<Layer> layers_;
  std::vector<int32_t> where_;      // key -> index in its layer's order, kFresh, kAbsent
  std::vector<uint64_t> last_use_;  // key -> tick of its last use
  std::vector<Entry> scratch_;
};

}  // namespace

std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, const CachePolicyShape& shape) {
  switch (kind) {
    case CachePolicyKind::Lru: return std::make_unique<OrderedPolicy<LruRank>>(shape);
    case CachePolicyKind::Frequency: return std::make_unique<OrderedPolicy<FrequencyRank>>(shape);
    case CachePolicyKind::CycleHeat: return std::make_unique<OrderedPolicy<CycleHeatRank>>(shape);
    case CachePolicyKind::CycleReuse: return std::make_unique<OrderedPolicy<CycleReuseRank>>(shape);
  }
  fail("expert cache: unknown policy");
}

}  // namespace deltafin
