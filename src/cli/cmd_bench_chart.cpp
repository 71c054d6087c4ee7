// deltafin bench-chart: pictures across several benches, from their --json
// files (one bench's own pictures are written by bench --svg).
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "cli/commands.h"
#include "util/file.h"

namespace deltafin::cli {

namespace {

struct BenchChartArgs {
  std::string scaling;
  std::vector<std::string> inputs;
};

int run(const BenchChartArgs& a) {
  std::vector<ScalingPoint> points;
  for (const std::string& path : a.inputs) points.push_back(read_scaling_point(path));  // all read before writing
  write_file_atomic(a.scaling, scaling_chart(points).svg());
  std::printf("wrote %s (%zu benches)\n", a.scaling.c_str(), points.size());
  return 0;
}

}  // namespace

Command add_bench_chart(CLI::App& app) {
  auto a = std::make_shared<BenchChartArgs>();
  CLI::App* sub = app.add_subcommand("bench-chart", "Charts across several bench --json files (drive scaling)");
  sub->footer(R"(--scaling draws aggregate read MB/s against the drive count, with the ideal line, from one bench --json
file per drive count (bench/suites/run.sh makes them).)");
  sub->add_option("--scaling", a->scaling, "Write the drive-scaling chart (aggregate MB/s vs drives, with the ideal line) here")
      ->required();
  sub->add_option("runs", a->inputs, "bench --json files, one per drive count")->required();
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
