// The expert cache replayed offline (issue 35, `deltafin cache-sim`): a route
// trace's passes (experts/route_trace.h) go through the engine's own
// ExpertCache and policies (experts/cache_policy.h) at any number of slots,
// with the heat histogram fed and decayed as the streaming source feeds it,
// and through Belady's optimum, the bound of any policy.
//
// What is replayed, as the streaming source asks (experts/streaming_source.cpp):
// each MoE layer of a pass demands its routes' experts, distinct and in
// ascending order (the routed-experts block's union); the layer becomes the
// cache's current one, its experts are added to the heat, those in a slot are
// taken first (hits), then a slot is claimed for each miss; all are held until
// the layer is done, then released. A pass decays the heat by
// kHeatDecayPerPosition per position. A demand is one (pass, layer, expert):
// for a decoded token, each of a layer's K routed experts; it is a hit when the
// expert is in a slot when the layer asks. Reads land at once and nothing is
// prefetched (route lookahead off): the hit rates are the cache's alone.
// Prefill passes (more than one position) are left out unless asked for; then
// a layer's rows are one request (the engine asks in 128-row slices, so a
// longer prompt differs a little). A request wider than the free slots
// claims the rest as slots come free: the engine frees them as its reads
// land, the replay as if all had landed, so there the two can differ.
//
// Belady's optimum (MIN): at a miss, evict the expert whose next demand is
// furthest in the future (never: furthest of all); the experts of the layer
// being computed are all held at once, so none of them is a candidate. It
// uses every slot (no pinned tier) and, when the policies have a pinned
// tier of P slots, may start with P experts of its choice (those demanded
// first), the free start the pinned tier gives them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experts/cache_policy.h"
#include "experts/expert_cache.h"
#include "experts/route_trace.h"
#include "store/heat.h"

namespace deltafin {

// A trace as the cache sees it: per pass, per MoE layer, the demanded experts.
struct CacheReplay {
  int64_t layers = 0, experts = 0, top_k = 0;
  std::vector<int64_t> moe_layers;  // the layers the trace routes, ascending: the layer cycle
  struct Step {
    int64_t layer = 0;
    size_t first = 0, count = 0;  // into `demands`: distinct experts, ascending
  };
  struct Pass {
    int64_t positions = 0;
    size_t first = 0, count = 0;  // into `steps`
  };
  std::vector<Pass> passes;
  std::vector<Step> steps;
  std::vector<int64_t> demands;
  bool decode(const Pass& p) const { return p.positions == 1; }
};

// Concatenates traces of one model (the same header) in order, every pass.
// A run of a layer's rows within a pass is one step. `names` (the files)
// name the trace in errors.
CacheReplay make_replay(const std::vector<RouteTrace>& traces, const std::vector<std::string>& names);

// The histogram the engine would hold after running these passes from an
// empty one: every demand added, every pass decayed.
HeatHistogram learn_heat(const CacheReplay& replay);

struct RouteTraceSummary {
  int64_t decode_tokens = 0, prefill_passes = 0, prefill_positions = 0, moe_layers = 0, experts = 0, top_k = 0;
  struct Layer {
    int64_t layer = 0;
    // The share of the layer's experts (hottest first) that serve 50, 80, 90
    // and 95 % of its decode routes.
    double coverage[4] = {0, 0, 0, 0};
    // The share of a decoded token's experts at this layer that the token
    // before (decoded too) also used there; -1 with fewer than two tokens.
    double reuse = -1;
  };
  std::vector<Layer> layers;
};
inline constexpr double kCoverageShares[4] = {0.50, 0.80, 0.90, 0.95};

// From the decode passes (a prefill between two tokens breaks their pair).
RouteTraceSummary summarize(const CacheReplay& replay);

struct CacheSimRow {
  size_t slots = 0, pinned = 0;
  std::string policy;  // a policy's name, or "belady"
  uint64_t demanded = 0, hits = 0;                  // decode
  uint64_t prefill_demanded = 0, prefill_hits = 0;  // with_prefill
  double hit_rate() const { return demanded ? static_cast<double>(hits) / static_cast<double>(demanded) : 0.0; }
};

struct CacheSimOptions {
  std::vector<size_t> slots;             // cache sizes, each all its slots (pinned ones included)
  std::vector<CachePolicyKind> policies;
  double pinned_fraction = 0;            // of each size, pinned to the hottest experts of the starting heat
  const HeatHistogram* heat = nullptr;   // the starting heat; null = empty
  bool with_prefill = false;             // replay the passes of several positions too
  int threads = 1;
};

// Checks a size against the replay: at least one layer's experts in the
// evictable slots. `what` names the size in the error ("--slots 8").
size_t pinned_slots_of(size_t slots, double pinned_fraction);
void check_cache_size(const CacheReplay& replay, size_t slots, double pinned_fraction, const std::string& what);

// A trace without decoded tokens is refused, naming `what` (its files).
void require_decode(const CacheReplay& replay, const std::string& what);

// One cache replaying a trace step by step, as simulate_policy runs it (and
// open to look inside between steps): an ExpertCache of `slots - pinned`
// evictable slots and `pinned` pinned ones filled from the starting heat,
// which it copies and then feeds and decays.
class PolicyReplay {
public:
  PolicyReplay(const CacheReplay& replay, CachePolicyKind kind, size_t slots, size_t pinned, const HeatHistogram* heat);
  // One layer's request, as the streaming source makes it; returns the hits.
  uint64_t step(const CacheReplay::Step& step);
  // A pass of `positions` ended: the heat decays.
  void end_pass(int64_t positions);
  bool holds(int64_t layer, int64_t expert) const { return cache_->contains(layer * r_.experts + expert); }
  const HeatHistogram& heat() const { return heat_; }

private:
  const CacheReplay& r_;
  HeatHistogram heat_;
  std::unique_ptr<ExpertCache> cache_;
};

// One policy at one size, and Belady's optimum at one size (`warm` experts of its choice to start with).
CacheSimRow simulate_policy(const CacheReplay& replay, CachePolicyKind kind, size_t slots, size_t pinned,
                            const HeatHistogram* heat, bool with_prefill);
CacheSimRow simulate_belady(const CacheReplay& replay, size_t slots, size_t warm, bool with_prefill);

// Every size: each policy in the order given, then Belady; run on `threads` threads.
std::vector<CacheSimRow> simulate(const CacheReplay& replay, const CacheSimOptions& options);

}  // namespace deltafin
