#include "model/kimi_k3/lookahead.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/kimi_k3/model.h"
#include "util/error.h"

namespace deltafin {

namespace {
constexpr double kAlpha = 0.2;      // §11 EMA weight
constexpr int kMinSamples = 16;     // samples before the gate decides
constexpr double kFloor = 0.10;     // recall below which reads stop
constexpr size_t kMultiRowCap = 32; // §11: union of per-row sets capped at 32

double overlap(const std::vector<int64_t>& a, const std::set<int64_t>& actual) {
  size_t n = 0;
  for (int64_t e : a) n += actual.count(e);
  return static_cast<double>(n);
}
}  // namespace

RouteLookahead::RouteLookahead(const K3Config& c, const K3Weights& w, LookaheadMode mode, ThreadPool* pool)
    : c_(c), w_(w), mode_(mode), pool_(pool) {
  const size_t L = static_cast<size_t>(c.num_hidden_layers);
  gates_.resize(L);
  last_route_.resize(L);
  pilot_pred_.resize(L);
  issued_.resize(L);
}

// The router of layer `next` on layer next-1's x_mlp. It uses the router as
// the spine stores it (BF16, or int8-row in that mode): no extra copy in RAM.
std::vector<int64_t> RouteLookahead::pilot(int64_t next, const Rows& x) const {
  const LayerWeights& lw = w_.layers[static_cast<size_t>(next)];
  const size_t T = x.T, d = x.n, E = static_cast<size_t>(c_.num_experts), k = static_cast<size_t>(c_.num_experts_per_token);
  Rows normed(T, d), z(T, E);
  for (size_t t = 0; t < T; ++t)
    rmsnorm(x.row(t), lw.post_attention_norm.data(), d, static_cast<float>(c_.rms_norm_eps), normed.row(t));
  matmul(lw.moe.router.view(), normed.v.data(), T, z.v.data(), pool_);
  std::map<int64_t, float> best;  // expert -> best choice score over rows
  std::vector<float> choice(E);
  for (size_t t = 0; t < T; ++t) {
    for (size_t e = 0; e < E; ++e) choice[e] = sigmoid(z.row(t)[e]) + lw.moe.correction_bias[e];
    for (int64_t e : top_k_experts(choice.data(), E, k)) {
      auto [it, fresh] = best.emplace(e, choice[static_cast<size_t>(e)]);
      if (!fresh) it->second = std::max(it->second, choice[static_cast<size_t>(e)]);
    }
  }
  std::vector<std::pair<int64_t, float>> all(best.begin(), best.end());
  if (T > 1 && all.size() > kMultiRowCap) {
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    all.resize(kMultiRowCap);
  }
  std::vector<int64_t> out;
  if (T == 1) {
    // One row (decode): most confident first. The reader serves prefetches in
    // order and stale ones are aborted when the real route arrives, so the
    // reads that did start are the likeliest to be used.
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    for (const auto& [e, s] : all) out.push_back(e);
    return out;
  }
  for (const auto& [e, s] : all) out.push_back(e);
  std::sort(out.begin(), out.end());  // several rows: ascending ids (§11)
  return out;
}

std::vector<int64_t> RouteLookahead::previous(int64_t layer) const {
  std::vector<int64_t> p = last_route_[static_cast<size_t>(layer)];
  std::sort(p.begin(), p.end());
  return p;
}

int RouteLookahead::choose(int64_t layer) const {
  const bool first = layer == 1;  // layer 1, the first MoE layer: no PILOT (§11)
  if (mode_ == LookaheadMode::Off) return 0;
  if (mode_ == LookaheadMode::On) return first ? 2 : 1;
  const Gate& g = gates_[static_cast<size_t>(layer)];
  if (first) return g.samples_prev >= kMinSamples && g.ema_prev < kFloor ? 0 : 2;
  if (g.samples_pilot < kMinSamples) return 1;
  const bool pilot_wins = g.samples_prev < kMinSamples || g.ema_pilot >= g.ema_prev;  // PILOT on ties
  const double ema = pilot_wins ? g.ema_pilot : g.ema_prev;
  if (ema < kFloor) return 0;
  return pilot_wins ? 1 : 2;
}

std::vector<int64_t> RouteLookahead::plan(int64_t next, const Rows& x_mlp) {
  if (mode_ == LookaheadMode::Off) return {};
  // Scoring continues while a layer is suppressed, so PILOT is always computed.
  pilot_pred_[static_cast<size_t>(next)] = pilot(next, x_mlp);
  const int which = choose(next);
  std::vector<int64_t> out = which == 1 ? pilot_pred_[static_cast<size_t>(next)] : which == 2 ? previous(next) : std::vector<int64_t>{};
  if (which == 0) ++counters_.suppressed_layers;
  issued_[static_cast<size_t>(next)] = out;
  return out;
}

std::vector<int64_t> RouteLookahead::plan_first_layer() {
  const int64_t first = 1;  // the first MoE layer (layer 0 is dense)
  if (mode_ == LookaheadMode::Off || first >= c_.num_hidden_layers) return {};
  const int which = choose(first);
  std::vector<int64_t> out = which == 0 ? std::vector<int64_t>{} : previous(first);
  if (which == 0) ++counters_.suppressed_layers;
  issued_[static_cast<size_t>(first)] = out;
  return out;
}

void RouteLookahead::observe(int64_t layer, const std::vector<Route>& routes) {
  if (mode_ == LookaheadMode::Off || routes.empty()) return;
  const size_t l = static_cast<size_t>(layer);
  std::set<int64_t> actual;
  for (const Route& r : routes) actual.insert(r.experts.begin(), r.experts.end());
  const double n = static_cast<double>(actual.size());
  Gate& g = gates_[l];
  auto feed = [](double& ema, int& samples, double r) {
    ema = samples == 0 ? r : ema + kAlpha * (r - ema);
    ++samples;
  };
  if (!pilot_pred_[l].empty()) {
    const double hits = overlap(pilot_pred_[l], actual);
    feed(g.ema_pilot, g.samples_pilot, hits / n);
    ++counters_.predicted_layers;
    counters_.pilot_hits += static_cast<uint64_t>(hits);
    counters_.actual += actual.size();
  }
  if (!last_route_[l].empty()) feed(g.ema_prev, g.samples_prev, overlap(last_route_[l], actual) / n);
  if (!issued_[l].empty()) {
    ++counters_.issued_layers;
    counters_.issued_experts += issued_[l].size();
    counters_.issued_hits += static_cast<uint64_t>(overlap(issued_[l], actual));
  }
  pilot_pred_[l].clear();
  issued_[l].clear();
  last_route_[l] = routes.back().experts;
}

std::string RouteLookahead::describe_gates() const {
  std::string out;
  char buf[160];
  for (size_t l = 0; l < gates_.size(); ++l) {
    const Gate& g = gates_[l];
    if (g.samples_pilot == 0 && g.samples_prev == 0) continue;
    const int which = choose(static_cast<int64_t>(l));
    std::snprintf(buf, sizeof buf, "layer %zu: pilot %.2f (%d), previous %.2f (%d) -> %s\n", l, g.ema_pilot,
                  g.samples_pilot, g.ema_prev, g.samples_prev, which == 0 ? "suppressed" : which == 1 ? "pilot" : "previous");
    out += buf;
  }
  return out;
}

}  // namespace deltafin
