// Per-step accounting of a streamed run: time, expert bytes read, cache hits
// and misses, lookahead recall and per-drive bandwidth for every forward pass,
// from differences of cumulative counters taken around it (StepStats,
// engine/run_stats.h). It formats nothing: bench/run_report.h does.
#pragma once

#include <unordered_set>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "load/loaded_model.h"
#include "engine/run_stats.h"

namespace deltafin {

class RunStatsCollector : public StepObserver {
public:
  explicit RunStatsCollector(LoadedModel& model) : m_(model) {}
  void step_begin(bool prefill) override;
  void step_end(bool prefill) override;

  const std::vector<StepStats>& steps() const { return steps_; }
  // The prefill passes' totals (PrefillTotals, engine/run_stats.h).
  PrefillTotals prefill_totals() const;
  // The mirror's fetch totals since the model loaded; none without a mirror.
  std::optional<MirrorTotals> mirror_totals() const;

private:
  struct Snapshot {
    std::chrono::steady_clock::time_point t;
    StreamCounters stream;
    LookaheadCounters look;
    std::vector<DriveCounters> drives;
  };
  Snapshot take() const;

  LoadedModel& m_;
  std::unordered_set<int64_t> prefill_pairs_;  // layer * experts + expert
  Snapshot begin_;
  std::vector<StepStats> steps_;
};

}  // namespace deltafin
