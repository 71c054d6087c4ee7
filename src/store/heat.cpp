#include "store/heat.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "store/install.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

constexpr int kHeatVersion = 1;

// One sequence for every histogram, so a version is never reused, even by a
// histogram assigned over another.
uint64_t next_version() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

std::string heat_path(const std::string& store_dir) {
  return (std::filesystem::path(store_dir) / "heat.json").string();
}

}  // namespace

HeatHistogram::HeatHistogram(int64_t layers, int64_t experts) : layers_(layers), experts_(experts) {
  if (layers < 0 || experts < 0) fail("heat histogram: negative shape ", layers, " x ", experts);
  counts_.assign(static_cast<size_t>(layers * experts), 0.0);
  layer_totals_.assign(static_cast<size_t>(layers), 0.0);
  layer_versions_.assign(static_cast<size_t>(layers), next_version());
}

HeatHistogram HeatHistogram::load(const std::string& store_dir, int64_t layers, int64_t experts) {
  const std::string path = heat_path(store_dir);
  if (!file_exists(path)) return HeatHistogram(layers, experts);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  if (!j.is_object()) fail(path, ": expected a JSON object");
  auto int_field = [&](const char* name) -> int64_t {
    if (!j.contains(name) || !j[name].is_number_integer()) fail(path, ": field '", name, "' missing or not an integer");
    return j[name].get<int64_t>();
  };
  if (int64_t v = int_field("version"); v != kHeatVersion)
    fail(path, ": field 'version' is ", v, ", this build reads version ", kHeatVersion);
  const int64_t l = int_field("layers"), e = int_field("experts");
  if (l != layers || e != experts)
    fail(path, ": field 'layers'/'experts' is ", l, " x ", e, " but the store's model has ", layers, " x ", experts);
  if (!j.contains("counts") || !j["counts"].is_array()) fail(path, ": field 'counts' missing or not an array");
  const nlohmann::json& c = j["counts"];
  if (c.size() != static_cast<size_t>(layers * experts))
    fail(path, ": field 'counts' has ", c.size(), " entries, expected layers x experts = ", layers * experts);
  HeatHistogram h(layers, experts);
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].is_number()) fail(path, ": field 'counts[", i, "]' is not a number");
    const double v = c[i].get<double>();
    if (!std::isfinite(v) || v < 0) fail(path, ": field 'counts[", i, "]' = ", v, " (must be finite and >= 0)");
    h.counts_[i] = v;
    h.layer_totals_[i / static_cast<size_t>(experts)] += v;
  }
  // Optional (files before issue 35 lack it): [reused, routed].
  if (j.contains("reuse")) {
    const nlohmann::json& r = j["reuse"];
    if (!r.is_array() || r.size() != 2 || !r[0].is_number() || !r[1].is_number())
      fail(path, ": field 'reuse' must be [reused, routed], two numbers");
    const double reused = r[0].get<double>(), routed = r[1].get<double>();
    if (!std::isfinite(reused) || !std::isfinite(routed) || reused < 0 || routed < reused)
      fail(path, ": field 'reuse' = [", reused, ", ", routed, "] (needs 0 <= reused <= routed, finite)");
    h.reused_ = reused;
    h.routed_ = routed;
  }
  return h;
}

bool HeatHistogram::save(const std::string& store_dir) const {
  const StoreWriteLock lock(store_dir);
  if (!lock.held()) return false;
  nlohmann::json j = {{"version", kHeatVersion}, {"layers", layers_},          {"experts", experts_},
                      {"counts", counts_},        {"reuse", {reused_, routed_}}};
  write_file_atomic(heat_path(store_dir), j.dump() + "\n");
  return true;
}

void HeatHistogram::add(int64_t layer, int64_t expert, double amount) {
  if (layer < 0 || layer >= layers_ || expert < 0 || expert >= experts_)
    fail("heat histogram: (layer ", layer, ", expert ", expert, ") outside ", layers_, " x ", experts_);
  counts_[static_cast<size_t>(layer * experts_ + expert)] += amount;
  layer_totals_[static_cast<size_t>(layer)] += amount;
  layer_versions_[static_cast<size_t>(layer)] = next_version();
}

void HeatHistogram::add_reuse(double reused, double routed) {
  reused_ += reused;
  routed_ += routed;
}

void ReuseTracker::decoded(int64_t layer, std::span<const int64_t> experts, HeatHistogram& heat) {
  std::vector<int64_t>& prev = previous_.at(static_cast<size_t>(layer));
  if (!prev.empty()) {
    size_t common = 0;
    for (size_t i = 0, j = 0; i < experts.size() && j < prev.size();) {
      if (experts[i] == prev[j]) ++common, ++i, ++j;
      else if (experts[i] < prev[j]) ++i;
      else ++j;
    }
    heat.add_reuse(static_cast<double>(common), static_cast<double>(experts.size()));
  }
  prev.assign(experts.begin(), experts.end());
}

void ReuseTracker::break_chain() {
  for (std::vector<int64_t>& p : previous_) p.clear();
}

void HeatHistogram::decay(double factor) {
  reused_ *= factor;
  routed_ *= factor;
  for (double& c : counts_) c *= factor;
  for (double& t : layer_totals_) t *= factor;
  decay_version_ = next_version();
}

void HeatHistogram::outside(int64_t layer, int64_t expert) const {
  fail("heat histogram: (layer ", layer, ", expert ", expert, ") outside ", layers_, " x ", experts_);
}

void HeatHistogram::no_layer(int64_t layer) const { fail("heat histogram: no layer ", layer); }

std::vector<std::pair<int64_t, int64_t>> HeatHistogram::hottest(size_t n) const {
  std::vector<size_t> idx;
  for (size_t i = 0; i < counts_.size(); ++i)
    if (counts_[i] > 0) idx.push_back(i);
  // Flat index order is (layer, expert) order, so the tie-break is on the index.
  auto hotter = [&](size_t a, size_t b) { return counts_[a] != counts_[b] ? counts_[a] > counts_[b] : a < b; };
  n = std::min(n, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(), hotter);
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(n);
  for (size_t k = 0; k < n; ++k)
    out.emplace_back(static_cast<int64_t>(idx[k]) / experts_, static_cast<int64_t>(idx[k]) % experts_);
  return out;
}

double HeatHistogram::total() const {
  double t = 0;
  for (double c : counts_) t += c;
  return t;
}

}  // namespace deltafin
