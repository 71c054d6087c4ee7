// deltafin trace-plot: SVG pictures of a saved run (a `run --trace` file and,
// optionally, its `run --stats-json` file).
#include <cstdio>
#include <string>

#include "bench/trace_plot.h"
#include "cli/commands.h"
#include "util/file.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {

struct TracePlotArgs {
  TracePlotOptions o;
  std::string reads_by = "kind";
};

int run(TracePlotArgs& a) {
  a.o.reads_by = a.reads_by == "drive" ? ReadsBy::Drive : ReadsBy::Kind;
  std::vector<std::string> notes;
  const std::vector<std::string> written = write_trace_plots(a.o, &notes);
  for (const std::string& n : notes) std::fprintf(stderr, "deltafin: note: %s\n", n.c_str());
  for (const std::string& path : written)
    std::printf("wrote %s (%s)\n", path.c_str(), human_bytes(static_cast<double>(File::open_read(path).size())).c_str());
  return 0;
}

}  // namespace

Command add_trace_plot(CLI::App& app) {
  auto a = std::make_shared<TracePlotArgs>();
  CLI::App* sub = app.add_subcommand(
      "trace-plot", "Draw a saved trace (run --trace) as SVG: drive bandwidth, read latency; with --stats, per-token time and hit rate");
  sub->footer(R"(Draws with no plotting dependency: PREFIX-drives.svg, read bandwidth per drive and in all over time
(the monitor's 10 ms bins, re-binned to about 100 points unless --bin-ms); PREFIX-reads.svg, read latency
(queued to done) of demand and prefetch reads over time. With the run's --stats-json file also
PREFIX-steps.svg (per token: compute against waiting for reads, stacked) and PREFIX-hits.svg (cache hit
rate per token). Titles, axes with units, legends; long runs are drawn as min/max envelopes or averaged
bars so a 1,000-token run stays readable.)");
  sub->add_option("trace", a->o.trace, "Trace file written by run --trace (JSON lines)")->required();
  sub->add_option("--svg", a->o.prefix, "Output prefix: writes PREFIX-drives.svg, PREFIX-reads.svg (and -steps, -hits)")
      ->required();
  sub->add_option("--stats", a->o.stats, "Per-step stats written by run --stats-json: adds PREFIX-steps.svg and PREFIX-hits.svg");
  sub->add_option("--bin-ms", a->o.bin_ms,
                  "Bandwidth bin width in ms, a whole multiple of the trace's 10 ms bins; default 100, finer for runs "
                  "under 10 s so about 100 bins show")
      ->check(number_above(0));
  sub->add_option("--reads-by", a->reads_by, "Read-latency series: kind (demand against prefetch) or drive")
      ->check(one_of({"kind", "drive"}))
      ->capture_default_str();
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
