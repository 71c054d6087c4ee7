// Eviction policies of the RAM expert cache (experts/expert_cache.h): which
// cached expert makes room for a missed one. The cache tells its policy what
// happens to its evictable slots (a key claimed one, a demand used one, a key
// left its slot, which layer is being computed) and asks it for the victim
// among the keys it may evict at that moment. `deltafin cache-sim`
// (experts/cache_sim.h) replays route traces through the same cache with the
// same policy objects, so a simulated policy is the engine's, bit for bit.
//
// Every policy ranks the keys in slots by a value, the lowest going first,
// ties to the least recently used (a claim or a demand hit is a use):
//   lru          value 0: the least recently used goes.
//   frequency    value h: the key's heat count (store/heat.h, decayed per
//                position), across all layers.
//   cycle-heat   value p / (1 + d), the engine's default since issue 4: d =
//                MoE layers until the key's layer comes round again in the
//                pass's layer cycle, p = (h + 1) / (layer total + E).
//   cycle-reuse  value -D, D the expected MoE-layer steps until the key is
//                used again: D = d + C (1/q - 1), C the cycle's length and q
//                the chance that the next visit of its layer routes it:
//                  q = min(1, q0 * lift(age)),
//                q0 = min(1, K (h + 1) / (total + E)) the heat's share, age
//                the layer's visits since the key's last use, and lift(a) =
//                (uses + 1) / (expected + 1) learned per layer: over its past
//                visits (decayed by kReuseStatsDecay per visit), how often
//                keys of age a came back against the sum of their q0. With
//                no temporal locality every lift is ~1 and q is the heat's;
//                where a layer's routes repeat from token to token, recent
//                keys get the lift they earned. cycle-heat's p / (1 + d)
//                ranks by (1 + d) / p, which lets the cycle distance outweigh
//                any skew: on a 60-layer cycle it drops an expert used by
//                half of all tokens, just computed (d = 59), before one used
//                by a tenth whose layer comes next (d = 0), which is needed
//                ~9 tokens later against ~2. D adds the distance to the reuse
//                time instead, in the same unit (docs/design.md §4.1).
// The pinned tier (--pin-gb) is outside every policy: pinned slots are never
// offered as victims.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/heat.h"
#include "util/function_ref.h"

namespace deltafin {

enum class CachePolicyKind { Lru, Frequency, CycleHeat, CycleReuse };

// The names, in the order the help lists them; cycle-heat is the default.
const std::vector<std::string>& cache_policy_names();
std::string cache_policy_name(CachePolicyKind kind);
// `where` names the option or field in the error: "--cache-policy: "x" is not a cache policy (lru, ...)".
CachePolicyKind parse_cache_policy(const std::string& name, const std::string& where);

// cycle-reuse's lift by age: ages 1 .. kReuseAges - 1 visits since the last
// use, then one bucket for older or never; its counts decay per visit.
inline constexpr size_t kReuseAges = 9;
inline constexpr double kReuseStatsDecay = 0.98;

// What a policy knows of the cache: key = layer * experts_per_layer + expert.
struct CachePolicyShape {
  int64_t experts_per_layer = 1;
  int64_t top_k = 1;  // experts per token at a layer (cycle-reuse's prior)
  // The layer cycle, as CacheOptions gives it (expert_cache.h).
  int64_t first_layer = 1, layer_cycle = 0;
  std::vector<int64_t> cycle_layers;
  const HeatHistogram* heat = nullptr;  // may be null: every count reads as 0
};

class CachePolicy {
public:
  virtual ~CachePolicy() = default;
  // The layer being computed; `again`: its next slice comes before the next layer.
  virtual void set_current_layer(int64_t layer, bool again) = 0;
  // `key` claimed an evictable slot at `tick` (the cache's use counter,
  // rising): a demand read (the current layer waits for it) or a prefetch.
  virtual void insert(int64_t key, uint64_t tick, bool demand) = 0;
  // A demand used `key`, in a slot already (ready or loading), at `tick`.
  virtual void touch(int64_t key, uint64_t tick) = 0;
  // `key` left its slot (evicted, failed, forgotten). Called under the
  // cache's lock from any thread (a read landing): reads nothing but the
  // policy's own state.
  virtual void erase(int64_t key) = 0;
  // The key to evict: the lowest value among the keys for which
  // evictable(key) holds, ties to the least recent use; -1 when none.
  // `demand`: for a demand read's claim, else a prefetch's (the predicates
  // differ). Between two queries of one kind a key may become evictable
  // unannounced (a release, a read landing), but it becomes unevictable only
  // through insert() or touch(): a policy may keep what it found for keys
  // that nothing happened to.
  virtual int64_t victim(FunctionRef<bool(int64_t key)> evictable, bool demand) = 0;
};

std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, const CachePolicyShape& shape);

// --cache-policy auto, the default: the engine's own rule, from the temporal
// reuse its heat histogram has measured (store/heat.h). The study of issue 35
// (bench/results/2026-12-05-cache-policy.md: five routing profiles x two
// families, heat learned on one prompt set and measured on another, Belady
// beside) found no single winner: cycle-reuse gains up to 13 points where a
// token reuses many of the previous token's experts, and cycle-heat is best
// by up to 0.6 where it reuses few. The line between them, placed on the
// training prompts' reuse (1.8x to 2.0x chance for the profiles cycle-heat
// wins, 2.3x and up for those cycle-reuse wins by points; K3's random-router
// model at 2.4x costs 0.6 at most): reuse of at least kAutoReuseOverChance
// times chance (top_k / experts), measured over at least kAutoMinRouted
// routed experts, picks cycle-reuse; anything less (a new store included)
// keeps cycle-heat.
inline constexpr double kAutoReuseOverChance = 2.2;
inline constexpr double kAutoMinRouted = 2000;
struct AutoPolicyChoice {
  CachePolicyKind kind = CachePolicyKind::CycleHeat;
  std::string why;  // "temporal reuse 7.8 % = 4.3x chance (heat.json)"
};
AutoPolicyChoice choose_cache_policy(const HeatHistogram* heat, int64_t top_k, int64_t experts);
// A policy name or "auto" (resolved by choose_cache_policy), as a user gives it.
const std::vector<std::string>& cache_policy_options();

}  // namespace deltafin
