// The heat histogram: how often each (layer, expert) has been used, decayed so
// recent use counts more, kept across runs in the store (heat.json, written
// atomically). setup reads it to choose experts to replicate; the cache uses
// it to weight eviction, to pin the hottest and to warm up. It lives in store
// because it is store data; the cache (a later part) feeds it.
#pragma once

#include <cstdint>
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
  double at(int64_t layer, int64_t expert) const;
  // Sum over the layer's experts, kept up to date by add() and decay() (the
  // cache reads it on every eviction; summing there would cost O(experts)).
  double layer_total(int64_t layer) const;
  // The n hottest (layer, expert) pairs with count > 0, hottest first, ties to lower (layer, expert).
  std::vector<std::pair<int64_t, int64_t>> hottest(size_t n) const;
  double total() const;
  int64_t layers() const { return layers_; }
  int64_t experts() const { return experts_; }

private:
  int64_t layers_ = 0, experts_ = 0;
  std::vector<double> counts_;
  std::vector<double> layer_totals_;
};

}  // namespace deltafin
