// deltafin bench, the report (issue 5): a text table of each metric's median
// and spread (and, with --vs, of the B/A ratios), the JSON of everything
// measured, and the pictures, drawn with bench/svg_chart.h through the charts
// trace-plot already makes (drives, steps, hits) plus the drive-scaling chart
// of several benches' JSON files.
#pragma once

#include <string>
#include <vector>

#include "bench/bench_runner.h"
#include "bench/svg_chart.h"
#include "bench/trace_plot.h"

namespace deltafin {

// The text report: configuration, cold or warm, warm-ups excluded, the token
// check's verdict (every mismatch with run, prompt and first position), and
// the tables.
std::string format_bench_report(const BenchResult& r);

// Everything measured, per run (metrics, per-prompt tokens and steps, the
// drive bins) and summarised, with the configuration and the command line.
std::string bench_json(const BenchResult& r, const std::string& command_line);

// The charts of the last measured run of configuration A.
const RunResult* last_measured_run(const BenchResult& r, int config = 0);
TraceSummary drive_summary(const RunResult& run);  // its monitor bins, re-binned as trace-plot does
StepSeries step_series(const RunResult& run);      // its prompts' decode steps, one after another

// Writes PREFIX-drives.svg (not for a resident model: no drives),
// PREFIX-steps.svg and PREFIX-hits.svg; returns the paths written and says in
// *notes what was skipped.
std::vector<std::string> write_bench_svgs(const BenchResult& r, const std::string& prefix,
                                          std::vector<std::string>* notes = nullptr);

// One bench's point of the drive-scaling chart, read from its --json file.
struct ScalingPoint {
  std::string file;
  double drives = 0;
  double median_mb_s = 0, min_mb_s = 0, max_mb_s = 0;  // summary.A.drives_total_mb_s
};
ScalingPoint read_scaling_point(const std::string& json_path);
// x = drives, y = aggregate MB/s (median, with each bench's min and max), and
// the ideal line N x the one-drive MB/s (the fewest-drive point scaled to one).
svg::LineChart scaling_chart(std::vector<ScalingPoint> points);

}  // namespace deltafin
