// deltafin trace-plot: pictures of a saved run (issue 5). Reads the monitor's
// JSON-lines trace (io/monitor.h: one object per read or cache hit, then one
// drive_bins line per drive) line by line, keeping only bounded summaries, and
// optionally the per-step stats of `run --stats-json` (engine/run_stats.h);
// draws them with bench/svg_chart.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/svg_chart.h"

namespace deltafin {

// MB/s (1 MB = 1e6 bytes) in bins of new_bin_s from the bytes a drive
// completed in bins of bin_s; new_bin_s must be a whole multiple of bin_s.
// The last bin may be partly after the run's end and is still divided by the
// full bin width (the trace does not say when the run ended).
std::vector<double> rebin_drive_bins(const std::vector<uint64_t>& bytes, double bin_s, double new_bin_s);

// Many (x, y) points in bounded memory: kept as they are up to raw_cap, then
// only min/max per time bucket (at most `buckets`, twice as wide whenever a
// later x needs it), which is all an envelope chart draws of them anyway.
class PointReducer {
public:
  explicit PointReducer(size_t raw_cap = 20000, size_t buckets = 4096);
  void add(double x, double y);  // x >= 0 (an earlier x counts as 0)
  size_t count() const { return count_; }
  // The raw points, or two per non-empty bucket (its min and its max at its middle).
  std::vector<svg::Point> points() const;

private:
  size_t raw_cap_, count_ = 0;
  bool overflowed_ = false;
  std::vector<svg::Point> raw_;
  double bucket_s_ = 0.001;
  std::vector<double> lo_, hi_;
};

// The plotted bin width when none is asked for: 100 ms, or finer (down to the
// trace's own bins) so a run shorter than 10 s still shows ~100 bins.
double auto_bin_s(size_t trace_bins, double bin_s);

// Which series the read-latency picture splits reads into.
enum class ReadsBy { Kind, Drive };

struct TraceSummary {
  double bin_s = 0, plot_bin_s = 0;               // the trace's bins and the re-binned width
  std::vector<std::vector<uint64_t>> drive_bins;   // [drive][bin] as in the trace, padded to one length
  std::vector<std::vector<double>> drive_mb_s;     // [drive][plotted bin] MB/s, all drives the same length
  uint64_t drive_bytes = 0;                         // sum of every drive's bins
  uint64_t lines = 0, reads = 0, demand_reads = 0, prefetch_reads = 0, hits = 0, failed = 0, cancelled = 0;
  uint64_t read_bytes = 0;                          // of the ok reads
  std::vector<std::pair<std::string, PointReducer>> latency_ms;  // series name -> (end_s, latency ms)
};

// Reads a trace line by line; a malformed line is an Error naming the file and
// line number. plot_bin_ms re-bins the drive bins (a multiple of the trace's;
// 0: auto_bin_s). Memory: the drive bins and the reducers, not the reads.
TraceSummary read_trace(const std::string& path, double plot_bin_ms = 0, ReadsBy by = ReadsBy::Kind);

// The decode steps of a `run --stats-json` file (prefill passes counted apart).
struct StepSeries {
  std::vector<double> ms, wait_ms;
  std::vector<uint64_t> demanded, hits, prefetch_hits;
  size_t prefill_passes = 0;
  double prefill_ms = 0;
};
StepSeries read_stats(const std::string& path);

svg::LineChart drives_chart(const TraceSummary& t);
svg::LineChart reads_chart(const TraceSummary& t, ReadsBy by);
svg::StackedBarChart steps_chart(const StepSeries& s);
svg::LineChart hits_chart(const StepSeries& s);

struct TracePlotOptions {
  std::string trace, stats, prefix;  // stats may be empty
  double bin_ms = 0;  // 0: auto_bin_s
  ReadsBy reads_by = ReadsBy::Kind;
};
// Writes PREFIX-drives.svg and PREFIX-reads.svg (and, with stats,
// PREFIX-steps.svg and PREFIX-hits.svg); returns the paths written. A trace
// without drive_bins lines (a run stopped before closing it) gets no drives
// picture; that is said in *notes.
std::vector<std::string> write_trace_plots(const TracePlotOptions& o, std::vector<std::string>* notes = nullptr);

}  // namespace deltafin
