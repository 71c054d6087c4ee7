#include "store/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "util/error.h"

namespace deltafin {

namespace {

// Two drives whose probes differ by less than this are the same model of
// drive measured twice: a short probe varies by several percent run to run.
constexpr double kEqualBandwidth = 1.15;
constexpr double kTie = 1e-9;

// Drive order used to break ties in layer k: starts at drive k mod D, so
// whatever is handed out on a tie goes round the drives from layer to layer.
size_t rotated_rank(size_t drive, size_t k, size_t drives) { return (drive + drives - k % drives) % drives; }

// Interleaves ids over the drives (smooth weighted round robin): each step
// every drive earns its count, the richest takes the next id and pays E.
std::vector<uint16_t> interleave(int64_t E, const std::vector<int64_t>& count, size_t k) {
  const size_t D = count.size();
  std::vector<uint16_t> drive_of(static_cast<size_t>(E));
  std::vector<int64_t> credit(D, 0);
  for (int64_t e = 0; e < E; ++e) {
    size_t best = 0;
    bool have = false;
    for (size_t d = 0; d < D; ++d) {
      credit[d] += count[d];
      if (count[d] == 0) continue;
      if (!have || credit[d] > credit[best] ||
          (credit[d] == credit[best] && rotated_rank(d, k, D) < rotated_rank(best, k, D)))
        best = d, have = true;
    }
    credit[best] -= E;
    drive_of[static_cast<size_t>(e)] = static_cast<uint16_t>(best);
  }
  return drive_of;
}

// Hottest first (ties to the lower id), each expert to the drive that would
// then carry the least heat per unit of weight, among drives still below
// their file count (ties: the drive with more room left, then rotated order).
// Unused experts come last and fill the room that is left.
std::vector<uint16_t> place_by_heat(const double* heat, int64_t E, const std::vector<int64_t>& count,
                                    const std::vector<double>& w, size_t k) {
  const size_t D = count.size();
  std::vector<int64_t> order(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return heat[a] > heat[b]; });
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) sum += heat[e];
  std::vector<double> load(D, 0.0);  // heat as a fraction of the layer's, per unit of weight
  std::vector<int64_t> room = count;
  std::vector<uint16_t> drive_of(static_cast<size_t>(E));
  for (int64_t e : order) {
    const double h = heat[e] / sum;
    size_t best = D;
    for (size_t d = 0; d < D; ++d) {
      if (room[d] == 0) continue;
      if (best == D) {
        best = d;
        continue;
      }
      const double ld = load[d] + h / w[d], lb = load[best] + h / w[best];
      if (ld < lb - kTie ||
          (std::fabs(ld - lb) <= kTie &&
           (room[d] > room[best] || (room[d] == room[best] && rotated_rank(d, k, D) < rotated_rank(best, k, D)))))
        best = d;
    }
    load[best] += h / w[best];
    --room[best];
    drive_of[static_cast<size_t>(e)] = static_cast<uint16_t>(best);
  }
  return drive_of;
}

}  // namespace

std::vector<double> placement_weights(const std::vector<double>& bw) {
  std::vector<size_t> order(bw.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bw[a] < bw[b]; });
  std::vector<double> w(bw.size());
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin + 1;
    while (end < order.size() && bw[order[end]] <= bw[order[begin]] * kEqualBandwidth) ++end;
    double sum = 0;
    for (size_t i = begin; i < end; ++i) sum += bw[order[i]];
    for (size_t i = begin; i < end; ++i) w[order[i]] = sum / static_cast<double>(end - begin);
    begin = end;
  }
  return w;
}

std::vector<std::vector<uint16_t>> place_experts(const PlacementInput& in) {
  const size_t D = in.drive_bytes_per_s.size();
  const int64_t E = in.experts;
  if (D == 0) fail("placement: no drives");
  if (D > 65535) fail("placement: ", D, " drives (at most 65535)");
  for (size_t d = 0; d < D; ++d)
    if (!(in.drive_bytes_per_s[d] > 0) || !std::isfinite(in.drive_bytes_per_s[d]))
      fail("placement: drive ", d, " bandwidth ", in.drive_bytes_per_s[d], " must be finite and > 0");
  if (in.layers < 1 || E < 1) fail("placement: ", in.layers, " layers x ", E, " experts");
  std::vector<bool> is_moe(static_cast<size_t>(in.layers), false);
  for (size_t i = 0; i < in.moe_layers.size(); ++i) {
    const int64_t l = in.moe_layers[i];
    if (l < 0 || l >= in.layers || (i && l <= in.moe_layers[i - 1]))
      fail("placement: MoE layer list must be ascending layers in [0, ", in.layers, ")");
    is_moe[static_cast<size_t>(l)] = true;
  }
  if (!in.heat.empty() && in.heat.size() != static_cast<size_t>(in.layers * E))
    fail("placement: heat of ", in.heat.size(), " counts for ", in.layers, " layers x ", E, " experts");
  for (double h : in.heat)
    if (!(h >= 0) || !std::isfinite(h)) fail("placement: heat counts must be finite and >= 0, got ", h);
  if (!in.keep_primaries.empty()) {
    if (in.keep_primaries.size() != static_cast<size_t>(in.layers * E))
      fail("placement: ", in.keep_primaries.size(), " kept primaries for ", in.layers, " layers x ", E, " experts");
    for (int64_t l : in.moe_layers)
      for (int64_t e = 0; e < E; ++e)
        if (in.keep_primaries[static_cast<size_t>(l * E + e)] >= D)
          fail("placement: the kept primary of (layer ", l, ", expert ", e, ") is drive ",
               in.keep_primaries[static_cast<size_t>(l * E + e)], " of ", D);
  }
  if (!in.replicate.empty() && D < 2)
    fail("--replicate-hot: replicating ", in.replicate.size(), " experts needs at least two drives, got one");

  // Weights as fractions of the whole (sum 1), so loads below compare at a
  // scale where kTie means "equal".
  std::vector<double> w = placement_weights(in.drive_bytes_per_s);
  const double W = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= W;
  std::vector<std::vector<uint16_t>> out(static_cast<size_t>(in.layers * E));
  // layer_files[l][d]: files on drive d in layer l (replicas included).
  std::vector<std::vector<int64_t>> layer_files(static_cast<size_t>(in.layers), std::vector<int64_t>(D, 0));
  std::vector<double> target(D, 0.0);  // running ideal share over the layers so far
  std::vector<int64_t> assigned(D, 0);

  for (size_t k = 0; k < in.moe_layers.size(); ++k) {
    const int64_t layer = in.moe_layers[k];
    // Counts per drive: the floor of the ideal share, then the remainder to the
    // drives furthest behind their running ideal (ties in rotated order). This
    // keeps every drive within one file of its ideal over any run of layers.
    std::vector<int64_t> count(D);
    int64_t given = 0;
    for (size_t d = 0; d < D; ++d) {
      const double share = static_cast<double>(E) * w[d];
      target[d] += share;
      count[d] = static_cast<int64_t>(std::floor(share));
      given += count[d];
    }
    std::vector<size_t> by_debt(D);
    std::iota(by_debt.begin(), by_debt.end(), 0);
    std::sort(by_debt.begin(), by_debt.end(), [&](size_t a, size_t b) {
      const double da = target[a] - static_cast<double>(assigned[a] + count[a]);
      const double db = target[b] - static_cast<double>(assigned[b] + count[b]);
      if (std::fabs(da - db) > kTie) return da > db;
      return rotated_rank(a, k, D) < rotated_rank(b, k, D);
    });
    for (size_t i = 0; given < E; i = (i + 1) % D, ++given) ++count[by_debt[i]];
    for (size_t d = 0; d < D; ++d) assigned[d] += count[d];

    const double* layer_heat = in.heat.empty() ? nullptr : in.heat.data() + layer * E;
    const bool hot = layer_heat && std::any_of(layer_heat, layer_heat + E, [](double h) { return h > 0; });
    std::vector<uint16_t> drive_of;
    if (!in.keep_primaries.empty())
      drive_of.assign(in.keep_primaries.begin() + layer * E, in.keep_primaries.begin() + (layer + 1) * E);
    else
      drive_of = hot ? place_by_heat(layer_heat, E, count, w, k) : interleave(E, count, k);
    for (int64_t e = 0; e < E; ++e) {
      out[static_cast<size_t>(layer * E + e)] = {drive_of[static_cast<size_t>(e)]};
      ++layer_files[static_cast<size_t>(layer)][drive_of[static_cast<size_t>(e)]];
    }
  }

  std::vector<int64_t> total(D, 0);
  for (const auto& per_layer : layer_files)
    for (size_t d = 0; d < D; ++d) total[d] += per_layer[d];
  // heat_load[layer][drive]: the layer's heat its primaries put on each drive.
  std::vector<std::vector<double>> heat_load;
  if (!in.heat.empty()) {
    heat_load.assign(static_cast<size_t>(in.layers), std::vector<double>(D, 0.0));
    for (int64_t l : in.moe_layers)
      for (int64_t e = 0; e < E; ++e)
        heat_load[static_cast<size_t>(l)][out[static_cast<size_t>(l * E + e)][0]] += in.heat[static_cast<size_t>(l * E + e)];
  }
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const auto& [layer, expert] : in.replicate) {
    if (layer < 0 || layer >= in.layers || !is_moe[static_cast<size_t>(layer)] || expert < 0 || expert >= E)
      fail("placement: cannot replicate (layer ", layer, ", expert ", expert, "): not a routed expert");
    if (!seen.insert({layer, expert}).second)
      fail("placement: (layer ", layer, ", expert ", expert, ") listed twice for replication");
    std::vector<uint16_t>& drives = out[static_cast<size_t>(layer * E + expert)];
    std::vector<int64_t>& files = layer_files[static_cast<size_t>(layer)];
    std::vector<double>* heat_on = heat_load.empty() ? nullptr : &heat_load[static_cast<size_t>(layer)];
    auto load = [&](size_t d) { return (heat_on ? (*heat_on)[d] : static_cast<double>(files[d])) / w[d]; };
    size_t best = D;
    for (size_t d = 0; d < D; ++d) {
      if (d == drives[0]) continue;
      if (best == D) {
        best = d;
        continue;
      }
      const double ld = load(d), lb = load(best);
      const double td = static_cast<double>(total[d]) / w[d], tb = static_cast<double>(total[best]) / w[best];
      if (ld < lb - kTie || (std::fabs(ld - lb) <= kTie && td < tb - kTie)) best = d;
    }
    if (heat_on) {
      const double half = in.heat[static_cast<size_t>(layer * E + expert)] / 2;
      (*heat_on)[drives[0]] -= half;
      (*heat_on)[best] += half;
    }
    drives.push_back(static_cast<uint16_t>(best));
    ++files[best];
    ++total[best];
  }
  return out;
}

std::vector<uint64_t> stripe_offsets_for(uint64_t record_bytes, const std::vector<double>& drive_bytes_per_s) {
  const size_t D = drive_bytes_per_s.size();
  if (D == 0) fail("stripes: no drives");
  for (size_t d = 0; d < D; ++d)
    if (!(drive_bytes_per_s[d] > 0) || !std::isfinite(drive_bytes_per_s[d]))
      fail("stripes: drive ", d, " bandwidth ", drive_bytes_per_s[d], " must be finite and > 0");
  constexpr uint64_t kPage = 4096;
  const uint64_t pages = (record_bytes + kPage - 1) / kPage;
  if (pages < D)
    fail("stripes: a ", record_bytes, "-byte expert record has ", pages, " pages of 4096 bytes, fewer than the ", D,
         " drives to stripe it over");
  const std::vector<double> w = placement_weights(drive_bytes_per_s);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  // Largest remainder: floor shares first, then one more page to the drives
  // with the largest fractions (ties to the lower drive index).
  std::vector<uint64_t> share(D);
  std::vector<std::pair<double, size_t>> rest;
  uint64_t given = 0;
  for (size_t d = 0; d < D; ++d) {
    const double exact = static_cast<double>(pages) * w[d] / sum;
    share[d] = static_cast<uint64_t>(std::floor(exact + kTie));
    given += share[d];
    rest.push_back({exact - static_cast<double>(share[d]), d});
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first + kTie; });
  for (size_t i = 0; given < pages; ++i, ++given) ++share[rest[i % D].second];
  std::vector<uint64_t> off{0};
  for (size_t d = 0; d < D; ++d) {
    if (share[d] == 0)
      fail("stripes: drive ", d, " would hold no page of a ", record_bytes, "-byte record (its bandwidth share is ",
           w[d] / sum, ")");
    off.push_back(std::min(record_bytes, off.back() + share[d] * kPage));
  }
  return off;
}

}  // namespace deltafin
