// deltafin bench, the measurement (issue 5): fixed prompts generated for a
// fixed number of tokens, a warm-up, N measured runs (of one configuration,
// or of two alternating A B A B ... so a comparison holds while the machine's
// speed drifts), every run's tokens checked against the first run's, and the
// median and spread of each metric over the runs. No CLI and no printing
// here: the command (cli/cmd_bench.cpp) builds the loaders, the report
// (bench/bench_report.h) prints and draws what this returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "load/loaded_model.h"
#include "engine/stats_collector.h"

namespace deltafin {

// --- prompts ------------------------------------------------------------------

struct BenchPrompt {
  std::string name;            // "builtin-16", "prompts.txt:3"
  std::vector<uint32_t> ids;
};
// A fixed set of token-id prompts of different lengths (4, 16, 64), the same
// on every run and machine, valid for any vocabulary (ids below `vocab`), so
// it works on generated models without a tokenizer round trip.
std::vector<BenchPrompt> builtin_prompts(int64_t vocab);
// One prompt per non-empty line: comma-separated token ids ("1, 2,3") or raw
// text (encoded with encode, no BOS). Errors name the file and line.
std::vector<BenchPrompt> read_prompts_file(const std::string& path,
                                           const std::function<std::vector<uint32_t>(const std::string&)>& encode,
                                           int64_t vocab);

// --- statistics ---------------------------------------------------------------

// Median (the mean of the middle two for an even count), min, max and the
// median absolute deviation from the median (not scaled to a sigma).
// NaN values are left out; n counts the rest (all zero when n == 0).
struct Spread {
  size_t n = 0;
  double median = 0, min = 0, max = 0, mad = 0;
};
Spread spread_of(std::vector<double> values);

// --- one run ------------------------------------------------------------------

struct Metric {
  std::string name, unit;
  double value = 0;
};

// One prompt generated once.
struct PromptRun {
  std::vector<uint32_t> tokens;   // generated ids
  GenerateStats gen;
  std::vector<StepStats> steps;   // the RunStatsCollector's, prefill passes first
  PrefillTotals prefill;
};

struct RunResult {
  int config = 0;                 // 0 = A (the main options), 1 = B (--vs)
  size_t index = 0;               // order run in (warm-ups included)
  bool warmup = false;
  bool correct = true;            // tokens equal the reference run's (check_tokens)
  std::vector<PromptRun> prompts;
  std::vector<Metric> metrics;    // what the report summarises; see run_metrics()
  double wall_s = 0, load_s = 0;  // load_s: only when the run loaded its model (--cold)
  // The monitor's 10 ms bins of this run's time window, [drive][bin] bytes.
  double bin_s = 0;
  std::vector<std::vector<uint64_t>> drive_bins;
};

// The ids each prompt generated, in prompt order.
std::vector<std::vector<uint32_t>> run_tokens(const RunResult& r);

// Where two runs' tokens first differ: prompt, position in its generated
// tokens, and the ids (-1: that run has no token there).
struct TokenMismatch {
  size_t run = 0;     // RunResult::index of the differing run
  int config = 0;
  size_t prompt = 0, position = 0;
  int64_t expected = -1, got = -1;
};
std::optional<TokenMismatch> first_difference(const std::vector<std::vector<uint32_t>>& reference,
                                              const std::vector<std::vector<uint32_t>>& got);

// Per-layer metrics are named kLayerMetricPrefix + layer + "_compute_ms" / "_wait_ms".
inline constexpr const char* kLayerMetricPrefix = "layer";

// Per-run metrics from a run's prompts and the monitor's figures (the drive
// vectors are empty for a resident model). Names are stable (JSON keys).
struct DriveWindow {
  std::vector<double> mb_s;          // bytes completed during the run / run wall time
  std::vector<double> busy;          // monitor busy time (>= 1 read in flight) / run wall time
  std::vector<double> bins_active;   // share of the run's 10 ms bins in which the drive completed bytes
};
std::vector<Metric> run_metrics(const std::vector<PromptRun>& prompts, const DriveWindow& drives, double wall_s,
                                uint64_t peak_rss);

// --- the whole benchmark --------------------------------------------------------

struct BenchConfig {
  std::string label;        // "A", "B"
  std::string options;      // the options as given, for the report
  std::string store_dir;    // "" for a resident --model run (no page cache to drop)
  std::function<std::unique_ptr<LoadedModel>()> load;
};

struct BenchOptions {
  int runs = 5, warmup = 1;
  int64_t max_new = 32;
  bool cold = false;
  int64_t prefill_chunk = kDefaultPrefillChunk;
  int64_t prefill_group = 0;  // 0 = by memory (engine/prefill.h)
};

struct MetricSummary {
  std::string name, unit;
  Spread spread;
};

struct BenchResult {
  std::vector<BenchConfig> configs;  // loaders unused after the run
  BenchOptions options;
  std::vector<BenchPrompt> prompts;
  std::vector<RunResult> runs;       // in the order run
  std::vector<TokenMismatch> mismatches;
  std::string describe_a, describe_b;  // describe_model (bench/run_report.h) of each configuration
  size_t drives = 0;                   // of configuration A's store (0: resident)
  std::string cold_note;               // what --cold did (page cache dropped for N files, ...)
  bool ok() const { return mismatches.empty(); }
};

// Sets every run's `correct` against runs[0] (the first run made, warm-up or
// not) and fills mismatches. A and B must agree too: it is the same model.
void check_tokens(BenchResult& r);

// Median and spread of each metric over the measured (not warm-up), correct
// runs of one configuration, in the metrics' order.
std::vector<MetricSummary> summarize(const BenchResult& r, int config);
// B/A of each metric, pair by pair (the i-th measured A run with the i-th
// measured B run, both correct); pairs where A is 0 or either is missing are
// left out of that metric's spread.
std::vector<MetricSummary> summarize_ratios(const BenchResult& r);

// Drops the page cache of every expert file of a store (posix_fadvise
// DONTNEED); returns a line saying how many files were dropped and failed
// (or, where the system has no such call, that nothing was dropped).
std::string drop_expert_page_cache(const std::string& store_dir);

// Makes the prompts once the first model is loaded (its vocabulary and
// tokenizer are needed for them).
using PromptMaker = std::function<std::vector<BenchPrompt>(LoadedModel&)>;

// Runs the benchmark: configs (1 or 2) are loaded once and kept (warm), or,
// with options.cold, loaded fresh for every run (after dropping the page
// cache of their expert files); warm-ups first (A B each), then
// options.runs measured rounds (A then B). `progress` gets one line per run.
BenchResult run_bench(std::vector<BenchConfig> configs, const PromptMaker& make_prompts, const BenchOptions& options,
                      const std::function<void(const std::string&)>& progress = {});

// Measures one run on a loaded model: each prompt generated on a fresh
// session with ignore_eos, observed by a RunStatsCollector.
RunResult measure_run(LoadedModel& model, const std::vector<BenchPrompt>& prompts, const BenchOptions& options);

}  // namespace deltafin
