// The Kimi K3 forward pass (k3-model.md §7) over 1..T new positions of a
// session, in fp32, with every reduction in the kernels' canonical order so a
// T-position pass equals T one-position passes bit for bit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "format/k3_checkpoint.h"
#include "model/common/expert_source.h"
#include "model/common/greedy.h"
#include "model/common/route.h"
#include "model/common/rows.h"
#include "model/kimi_k3/kda_log.h"
#include "model/kimi_k3/session.h"
#include "model/kimi_k3/weights.h"

namespace deltafin {

class ThreadPool;
class RouteLookahead;

// How one pass over many rows is cut (engine/prefill.h). The pass is layer
// major: every row goes through layer i before any goes through layer i+1.
// Inside a layer, attention and the experts run in slices of `slice_rows`
// rows (0 = all rows at once), which bounds the per-slice scratch; the
// experts of a layer are then asked for slice by slice, and a cache that
// holds the layer's union reads each of them once. `cancelled`, if set, is
// asked before every layer and, inside a layer, between slices, between the
// experts of a slice and between the heads of every attention row, at most
// once per kCancelPollInterval, so a stop is seen within about that much
// model time even in one long layer of a huge prompt. When it returns true
// the pass is abandoned: forward() returns empty Rows and the session is left
// part-way (the caller restores the snapshot it took before the pass).
// `on_layer`, if set, is told each layer's index as it starts (progress).
inline constexpr std::chrono::microseconds kCancelPollInterval{20'000};
struct PassShape {
  size_t slice_rows = 0;
  std::function<bool()> cancelled;
  std::function<void(int64_t layer)> on_layer;
  std::chrono::microseconds poll_interval = kCancelPollInterval;  // tests set 0: every poll asks
};

class K3Model {
public:
  K3Model(const K3Config& config, const K3Weights& weights, ExpertSource& experts, ThreadPool* pool);

  // Runs tokens at positions session.length() ... and advances the session.
  // Returns logits [T, V] for every position when all_logits, else [1, V]
  // for the last one.
  Rows forward(K3Session& session, std::span<const uint32_t> tokens, bool all_logits, const PassShape& shape = {});

  // Route lookahead (nullptr = none): predictions become experts_.prefetch() hints.
  void set_lookahead(RouteLookahead* lookahead) { lookahead_ = lookahead; }

  // While a log is set, every forward() records its KDA step inputs there
  // (speculative verification); nullptr (the default) records nothing.
  void set_kda_log(KdaLog* log) { kda_log_ = log; }
  // Steps every KDA layer's state over the first `rows` rows of `log`, as the
  // logged pass did: the session must hold the state from before that pass.
  void replay_kda(K3Session& session, const KdaLog& log, size_t rows) const;

  // Context capture for DSpark (k3-model.md §10.2): after each listed 0-based
  // layer completes, every row's h (the block-partial sum after h <- p + f)
  // is rounded to BF16 and kept; captured() holds the last forward()'s rows
  // [T, layers.size() * hidden], the layers' slices concatenated in list order.
  // An empty list (the default) captures nothing.
  void set_capture_layers(std::vector<int64_t> layers);
  const Rows& captured() const { return captured_; }

  // The routes of the last forward() call, [layer][position] (layer 0 empty).
  const std::vector<std::vector<Route>>& last_routes() const { return routes_; }
  const K3Config& config() const { return c_; }

private:
  // Attention over rows that sit at positions s.length() + offset ...: the
  // layer's cache or state must already hold every position before them.
  void attention_kda(int64_t layer, K3Session& s, const Rows& x, Rows& out);
  void attention_mla(int64_t layer, K3Session& s, const Rows& x, Rows& out, size_t offset);
  void attention_sliced(int64_t layer, K3Session& s, const Rows& x, Rows& out, size_t slice_rows);
  void dense_mlp(const LayerWeights& w, const Rows& x, Rows& out, size_t slice_rows);
  void moe(int64_t layer, const Rows& x, Rows& out, size_t slice_rows);
  void moe_rows(int64_t layer, const Rows& x, const Rows& zl, size_t r0, size_t n, Rows& out);
  Route route(const MoeWeights& w, const float* router_logits) const;
  void mix(const std::vector<const float*>& values, const std::vector<float>& s, float* out) const;
  // Asks the pass's `cancelled` (throttled to kCancelPollInterval); true
  // from then on once it said so. stop_if_cancelled() throws PassCancelled,
  // which forward() catches: only ever called between whole units of work.
  bool cancel_requested();
  void stop_if_cancelled();
  struct PassCancelled {};

  const K3Config& c_;
  const K3Weights& w_;
  ExpertSource& experts_;
  ThreadPool* pool_;
  RouteLookahead* lookahead_ = nullptr;
  std::vector<std::vector<Route>> routes_;
  KdaLog* kda_log_ = nullptr;
  std::vector<int64_t> capture_layers_;
  Rows captured_;
  const PassShape* shape_ = nullptr;  // during forward() only
  bool cancel_seen_ = false;
  std::chrono::steady_clock::time_point cancel_polled_{};
};

}  // namespace deltafin
