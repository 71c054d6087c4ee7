// Route lookahead (k3-model.md §11): while layer L runs, predict layer L+1's
// experts and prefetch them. PILOT applies layer L+1's post-attention norm and
// router to layer L's x_mlp; the previous-token predictor reuses the last
// pass's route of the same layer (the only one for the first MoE layer).
// Predictions only start reads: the real router decides at L+1, so nothing
// here can change an output bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/common/route_lookahead.h"
#include "model/kimi_k3/weights.h"

namespace deltafin {

struct Route;
struct Rows;
class ThreadPool;

class RouteLookahead final : public RouteLookaheadReport {
public:
  RouteLookahead(const K3Config& config, const K3Weights& weights, LookaheadMode mode, ThreadPool* pool);

  LookaheadMode mode() const override { return mode_; }
  // The experts to prefetch for MoE layer `next` given layer next-1's x_mlp
  // rows (one row: most confident first; several: ascending ids; empty when
  // the gate says not to). Also remembers the PILOT prediction for scoring.
  std::vector<int64_t> plan(int64_t next, const Rows& x_mlp);
  // For the first MoE layer at the start of a pass: the previous token's route.
  std::vector<int64_t> plan_first_layer();
  // The real routes of `layer` for this pass: scores both predictors, feeds the gates.
  void observe(int64_t layer, const std::vector<Route>& routes);

  const LookaheadCounters& counters() const override { return counters_; }
  // Per layer: PILOT and previous-token recall EMAs, samples, whether suppressed now.
  std::string describe_gates() const override;

private:
  struct Gate {
    double ema_pilot = 0, ema_prev = 0;
    int samples_pilot = 0, samples_prev = 0;
  };
  std::vector<int64_t> pilot(int64_t next, const Rows& x_mlp) const;
  std::vector<int64_t> previous(int64_t layer) const;
  // Which prediction the gate issues for `layer`: 0 none, 1 PILOT, 2 previous token.
  int choose(int64_t layer) const;

  const K3Config& c_;
  const K3Weights& w_;
  LookaheadMode mode_;
  ThreadPool* pool_;
  std::vector<Gate> gates_;
  std::vector<std::vector<int64_t>> last_route_;   // previous pass, last row, per layer
  std::vector<std::vector<int64_t>> pilot_pred_;   // this pass, per layer
  std::vector<std::vector<int64_t>> issued_;       // this pass, per layer
  LookaheadCounters counters_;
};

}  // namespace deltafin
