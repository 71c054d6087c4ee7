// The heat histogram: how often each (layer, expert) has been used, decayed so
// recent use counts more, kept across runs in the store (heat.json, written
// atomically). setup reads it to choose experts to replicate; the cache uses
// it to weight eviction, to pin the hottest and to warm up. It lives in store
// because it is store data; the cache (a later part) feeds it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace deltafin {

class HeatHistogram {
public:
  HeatHistogram() = default;
  HeatHistogram(int64_t layers, int64_t experts);

  // store_dir/heat.json, or an empty histogram of this shape when absent.
  // A file of another shape or malformed is an error naming it.
  static HeatHistogram load(const std::string& store_dir, int64_t layers, int64_t experts);
  // Writes store_dir/heat.json atomically, holding the store's lock shared
  // (store/install.h StoreWriteLock) while its temporary exists. false, and
  // nothing written, while a setup holds the store (it is rewriting it).
  bool save(const std::string& store_dir) const;

  void add(int64_t layer, int64_t expert, double amount = 1.0);
  // Multiplies every count by `factor` (e.g. once per token: 0.999).
  void decay(double factor);
  // Inline: the cache's eviction order reads them for every ranked expert.
  double at(int64_t layer, int64_t expert) const {
    if (layer < 0 || layer >= layers_ || expert < 0 || expert >= experts_) outside(layer, expert);
    return counts_[static_cast<size_t>(layer * experts_ + expert)];
  }
  // Sum over the layer's experts, kept up to date by add() and decay() (the
  // cache reads it on every eviction; summing there would cost O(experts)).
  double layer_total(int64_t layer) const {
    if (layer < 0 || layer >= layers_) no_layer(layer);
    return layer_totals_[static_cast<size_t>(layer)];
  }
  // The n hottest (layer, expert) pairs with count > 0, hottest first, ties to lower (layer, expert).
  std::vector<std::pair<int64_t, int64_t>> hottest(size_t n) const;
  double total() const;
  // Temporal reuse (issue 35): of the experts decoded tokens routed at a
  // layer, how many the token before routed there too, summed over layers
  // and decayed with the counts. --cache-policy auto reads it
  // (experts/cache_policy.h); heat.json keeps it across runs.
  void add_reuse(double reused, double routed);
  double reused() const { return reused_; }
  double routed() const { return routed_; }
  // Changes whenever a count of `layer` may have changed (an add to it, a
  // decay of all), and never takes a value it had before, in any histogram:
  // whoever keeps values derived from the counts (the cache's eviction order,
  // experts/cache_policy.h) compares it instead of reading every count.
  uint64_t layer_version(int64_t layer) const {
    const uint64_t v = layer_add_version(layer);
    return v > decay_version_ ? v : decay_version_;
  }
  // The same for adds alone: a decay multiplies every count by one factor,
  // which keeps their order (or rounds two together), so an order of counts
  // needs redoing only when this changes.
  uint64_t layer_add_version(int64_t layer) const {
    if (layer < 0 || layer >= layers_) no_layer(layer);
    return layer_versions_[static_cast<size_t>(layer)];
  }
  int64_t layers() const { return layers_; }
  int64_t experts() const { return experts_; }

private:
  [[noreturn]] void outside(int64_t layer, int64_t expert) const;
  [[noreturn]] void no_layer(int64_t layer) const;

  int64_t layers_ = 0, experts_ = 0;
  std::vector<double> counts_;
  std::vector<double> layer_totals_;
  std::vector<uint64_t> layer_versions_;  // of the last add to each layer
  double reused_ = 0, routed_ = 0;
  uint64_t decay_version_ = 0;            // of the last decay
};

// The decay the streaming source gives the histogram per position processed
// (experts/streaming_source.cpp; cache-sim replays it): a use ~700 tokens ago
// counts half as much as one now.
inline constexpr double kHeatDecayPerPosition = 0.999;

// Feeds a histogram's reuse as decoded tokens' routes arrive, layer by layer:
// each route against the previous decoded token's at the same layer. A
// pass of several positions (a prompt) breaks the chain: the next decoded
// token has no predecessor to compare with.
class ReuseTracker {
public:
  explicit ReuseTracker(int64_t layers) : previous_(static_cast<size_t>(layers)) {}
  // `experts`: a decoded token's route at `layer`, distinct and ascending.
  void decoded(int64_t layer, std::span<const int64_t> experts, HeatHistogram& heat);
  void break_chain();

private:
  std::vector<std::vector<int64_t>> previous_;  // [layer]: ascending; empty = none
};

}  // namespace deltafin
