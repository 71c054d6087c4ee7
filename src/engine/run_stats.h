// Per-step accounting of a streamed run: time, expert bytes read, cache hits
// and misses, lookahead recall and per-drive bandwidth for every forward pass,
// from differences of cumulative counters taken around it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/loaded_model.h"

namespace deltafin {

struct StepStats {
  bool prefill = false;
  double ms = 0, wait_ms = 0;
  uint64_t bytes_read = 0, demanded = 0, hits = 0, prefetch_hits = 0, inflight = 0, misses = 0;
  uint64_t prefetch_issued = 0, prefetch_cancelled = 0;
  uint64_t pilot_hits = 0, pilot_actual = 0;
  std::vector<double> drive_mb_s;  // bytes each drive completed during the step / step time
};

class RunStatsCollector : public StepObserver {
public:
  explicit RunStatsCollector(const LoadedK3& model) : m_(model) {}
  void step_begin(bool prefill) override;
  void step_end(bool prefill) override;

  const std::vector<StepStats>& steps() const { return steps_; }
  // One line per step.
  static std::string format_step(size_t index, const StepStats& s);
  // Totals over the decode steps (and the prefill separately) plus peak RSS.
  std::string summary() const;
  // Every step and the configuration, for scripts (bench/).
  std::string to_json() const;

private:
  struct Snapshot {
    std::chrono::steady_clock::time_point t;
    StreamCounters stream;
    LookaheadCounters look;
    std::vector<DriveCounters> drives;
  };
  Snapshot take() const;

  const LoadedK3& m_;
  Snapshot begin_;
  std::vector<StepStats> steps_;
};

}  // namespace deltafin
