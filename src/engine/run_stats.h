// Per-step accounting of a streamed run: time, expert bytes read, cache hits
// and misses, lookahead recall and per-drive bandwidth for every forward pass,
// from differences of cumulative counters taken around it.
#pragma once

#include <unordered_set>

#include <chrono>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/loaded_model.h"

namespace deltafin {

struct StepStats {
  bool prefill = false;
  uint64_t positions = 0;          // rows of the pass
  uint64_t unique_new = 0;         // prefill: (layer, expert) pairs routed to for the first time in this prefill
  double ms = 0, wait_ms = 0;
  uint64_t bytes_read = 0, demanded = 0, hits = 0, prefetch_hits = 0, inflight = 0, misses = 0;
  uint64_t prefetch_issued = 0, prefetch_cancelled = 0, prefetch_gated = 0;
  uint64_t pilot_hits = 0, pilot_actual = 0;
  uint64_t fetched = 0, fetch_bytes = 0;  // streamed stores: experts fetched from the mirror, body bytes
  double fetch_s = 0;                     // summed fetch time (parallel fetches overlap)
  std::vector<double> drive_mb_s;  // bytes each drive completed during the step / step time
  // Per layer (index = layer; 0 for layers without routed experts): the
  // expert phase's time and the waiting for reads within it, ms.
  std::vector<double> layer_expert_ms, layer_wait_ms;
};

class RunStatsCollector : public StepObserver {
public:
  explicit RunStatsCollector(LoadedModel& model) : m_(model) {}
  void step_begin(bool prefill) override;
  void step_end(bool prefill) override;

  const std::vector<StepStats>& steps() const { return steps_; }
  // One line per step.
  static std::string format_step(size_t index, const StepStats& s);
  // Totals over the decode steps (and the prefill separately) plus peak RSS.
  std::string summary() const;

  // The prompt's expert-major figures: unique (layer, expert) pairs its
  // routes touched, their bytes, bytes read during prefill passes, and
  // amplification = read / unique bytes (1.00 = every needed expert read
  // exactly once; lookahead reads of experts the prompt never used count).
  struct PrefillTotals {
    uint64_t positions = 0, passes = 0, unique_pairs = 0, unique_bytes = 0, bytes_read = 0;
    double ms = 0;
    double amplification() const { return unique_bytes ? static_cast<double>(bytes_read) / unique_bytes : 0.0; }
  };
  PrefillTotals prefill_totals() const;
  // Time to first token, reported in to_json().
  double ttft_ms = 0;
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

  LoadedModel& m_;
  std::unordered_set<int64_t> prefill_pairs_;  // layer * experts + expert
  Snapshot begin_;
  std::vector<StepStats> steps_;
};

}  // namespace deltafin
