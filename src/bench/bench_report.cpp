#include "bench/bench_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

// Large figures (bytes) whole, the rest with 4 significant digits; NaN (no
// such figure in this run, e.g. no lookahead) as "-".
std::string num(double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  if (std::fabs(v) >= 1e5) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string pad(const std::string& s, size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

bool is_layer_metric(const std::string& name) {
  const std::string prefix = kLayerMetricPrefix;
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         std::isdigit(static_cast<unsigned char>(name[prefix.size()]));
}

std::string table(const std::vector<MetricSummary>& rows, const std::string& heading) {
  std::string out = heading + "\n";
  out += pad("metric", 26, true) + pad("median", 13) + pad("min", 13) + pad("max", 13) + pad("MAD", 11) + pad("n", 4) +
         "  unit\n";
  for (const MetricSummary& m : rows) {
    if (is_layer_metric(m.name)) continue;  // in layer_table
    const Spread& s = m.spread;
    const bool any = s.n > 0;
    out += pad(m.name, 26, true) + pad(any ? num(s.median) : "-", 13) + pad(any ? num(s.min) : "-", 13) +
           pad(any ? num(s.max) : "-", 13) + pad(any ? num(s.mad) : "-", 11) + pad(std::to_string(s.n), 4) + "  " +
           m.unit + "\n";
  }
  return out;
}

// Per MoE layer, one line: the medians of its expert compute and its waiting
// for reads per decode token (the per-layer rows of the summary, paired).
std::string layer_table(const std::vector<MetricSummary>& rows, const std::string& heading) {
  std::string out;
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    const std::string& n = rows[i].name;
    const std::string suffix = "_compute_ms";
    if (!is_layer_metric(n) || n.size() < suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const size_t prefix = std::string(kLayerMetricPrefix).size();
    const std::string layer = n.substr(prefix, n.size() - suffix.size() - prefix);
    const Spread& c = rows[i].spread;
    const Spread& w = rows[i + 1].spread;
    out += "  layer " + pad(layer, 3, true) + " compute " + pad(c.n ? num(c.median) : "-", 10) + " ms, waiting " +
           pad(w.n ? num(w.median) : "-", 10) + " ms\n";
  }
  if (out.empty()) return heading + " not measured (no routed-expert reads: a resident model)\n";
  return heading + "\n" + out;
}

const char* label(int config) { return config == 0 ? "A" : "B"; }

std::string prompt_lengths(const BenchResult& r) {
  std::string s;
  for (const BenchPrompt& p : r.prompts) s += (s.empty() ? "" : ", ") + std::to_string(p.ids.size());
  return s;
}

}  // namespace

std::string format_bench_report(const BenchResult& r) {
  const BenchOptions& o = r.options;
  std::string out;
  out += cat("deltafin bench: ", r.prompts.size(), r.prompts.size() == 1 ? " prompt (" : " prompts (", prompt_lengths(r), " tokens) x ", o.max_new,
             " generated tokens each (ignore-eos), fresh session per prompt; ", o.runs, " measured run",
             o.runs == 1 ? "" : "s", " per configuration after ", o.warmup, " warm-up run", o.warmup == 1 ? "" : "s",
             " (warm-up runs are excluded from every figure)\n");
  for (size_t c = 0; c < r.configs.size(); ++c)
    out += cat(label(static_cast<int>(c)), ": ", r.configs[c].options.empty() ? "(default options)" : r.configs[c].options,
               "; ", c == 0 ? r.describe_a : r.describe_b, "\n");
  if (r.configs.size() == 2) out += "runs alternate A B A B ...; both configurations stay loaded (each keeps its own cache)\n";
  if (o.cold)
    out += cat("cold runs: every run loads its model afresh (expert cache empty, heat not written back)",
               r.cold_note.empty() ? "; resident model: no store page cache to drop" : "; " + r.cold_note, "\n");
  else
    out += r.drives == 0 && r.configs[0].store_dir.empty()
               ? "warm runs: the model stays loaded between runs (every expert resident)\n"
               : "warm runs: the model stays loaded between runs (its expert cache carries over); heat not written back\n";
  if (r.ok()) {
    out += cat("tokens: every run's tokens equal the first run's (", r.runs.size(), r.runs.size() == 1 ? " run" : " runs",
               " incl. warm-ups, ", r.prompts.size(), " prompts)\n");
  } else {
    for (const TokenMismatch& m : r.mismatches)
      out += cat("CORRECTNESS FAILURE: run ", m.run + 1, " (", label(m.config), "), prompt ", r.prompts[m.prompt].name,
                 ": generated token ", m.position, " is ", m.got, ", the first run's is ", m.expected,
                 " -- this run is left out of every figure\n");
  }
  const auto a = summarize(r, 0);
  out += "\n" + table(a, r.configs.size() == 2 ? "A (median and spread over its measured runs):" : "median and spread over the measured runs:");
  if (r.configs.size() == 2) {
    out += "\n" + table(summarize(r, 1), "B (median and spread over its measured runs):");
    out += "\n" + table(summarize_ratios(r), "B / A, pair by pair (run i of B over run i of A):");
  }
  out += "\n" + layer_table(a, "per MoE layer, expert compute vs waiting for reads (A, medians, per decode token):");
  if (r.configs.size() == 2)
    out += layer_table(summarize(r, 1), "per MoE layer, expert compute vs waiting for reads (B, medians, per decode token):");
  return out;
}

std::string bench_json(const BenchResult& r, const std::string& command_line) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["command"] = command_line;
  ordered_json configs = ordered_json::array();
  for (size_t c = 0; c < r.configs.size(); ++c)
    configs.push_back({{"label", label(static_cast<int>(c))},
                       {"options", r.configs[c].options},
                       {"store", r.configs[c].store_dir},
                       {"describe", c == 0 ? r.describe_a : r.describe_b}});
  j["configs"] = configs;
  j["drives"] = r.drives;
  j["runs"] = r.options.runs;
  j["warmup"] = r.options.warmup;
  j["warmup_excluded"] = true;
  j["max_new"] = r.options.max_new;
  j["prefill_chunk"] = r.options.prefill_chunk;
  j["prefill_group"] = r.options.prefill_group;
  j["cold"] = r.options.cold;
  j["cold_note"] = r.cold_note;
  ordered_json prompts = ordered_json::array();
  for (const BenchPrompt& p : r.prompts) prompts.push_back({{"name", p.name}, {"ids", p.ids}});
  j["prompts"] = prompts;
  j["tokens_equal"] = r.ok();
  ordered_json mism = ordered_json::array();
  for (const TokenMismatch& m : r.mismatches)
    mism.push_back({{"run", m.run}, {"config", label(m.config)}, {"prompt", r.prompts[m.prompt].name},
                    {"position", m.position}, {"expected", m.expected}, {"got", m.got}});
  j["mismatches"] = mism;
  auto summary = [](const std::vector<MetricSummary>& rows) {
    ordered_json s = ordered_json::object();
    for (const MetricSummary& m : rows)
      s[m.name] = {{"unit", m.unit}, {"n", m.spread.n}, {"median", m.spread.median}, {"min", m.spread.min},
                   {"max", m.spread.max}, {"mad", m.spread.mad}};
    return s;
  };
  j["summary"]["A"] = summary(summarize(r, 0));
  if (r.configs.size() == 2) {
    j["summary"]["B"] = summary(summarize(r, 1));
    j["summary"]["B/A"] = summary(summarize_ratios(r));
  }
  ordered_json runs = ordered_json::array();
  for (const RunResult& run : r.runs) {
    ordered_json jr;
    jr["index"] = run.index;
    jr["config"] = label(run.config);
    jr["warmup"] = run.warmup;
    jr["correct"] = run.correct;
    jr["wall_s"] = run.wall_s;
    jr["load_s"] = run.load_s;
    ordered_json metrics = ordered_json::object();
    for (const Metric& m : run.metrics) metrics[m.name] = m.value;  // NaN is written as null
    jr["metrics"] = metrics;
    ordered_json ps = ordered_json::array();
    for (size_t i = 0; i < run.prompts.size(); ++i) {
      const PromptRun& p = run.prompts[i];
      ordered_json steps = ordered_json::array();
      for (const StepStats& s : p.steps)
        steps.push_back({{"prefill", s.prefill}, {"positions", s.positions}, {"ms", s.ms}, {"wait_ms", s.wait_ms},
                         {"bytes_read", s.bytes_read}, {"demanded", s.demanded}, {"hits", s.hits},
                         {"prefetch_hits", s.prefetch_hits}, {"inflight", s.inflight}, {"misses", s.misses},
                         {"pilot_hits", s.pilot_hits}, {"pilot_actual", s.pilot_actual}, {"drive_mb_s", s.drive_mb_s}});
      ps.push_back({{"prompt", r.prompts[i].name}, {"tokens", p.tokens}, {"ttft_ms", p.gen.ttft_seconds * 1e3},
                    {"prefill_ms", p.gen.prefill_seconds * 1e3}, {"prefill_bytes_read", p.prefill.bytes_read},
                    {"prefill_unique_bytes", p.prefill.unique_bytes}, {"steps", steps}});
    }
    jr["prompts"] = ps;
    jr["bin_s"] = run.bin_s;
    jr["drive_bins"] = run.drive_bins;
    runs.push_back(jr);
  }
  j["runs_detail"] = runs;
  return j.dump(1) + "\n";
}

const RunResult* last_measured_run(const BenchResult& r, int config) {
  for (auto it = r.runs.rbegin(); it != r.runs.rend(); ++it)
    if (it->config == config && !it->warmup) return &*it;
  return nullptr;
}

TraceSummary drive_summary(const RunResult& run) {
  TraceSummary t;
  t.bin_s = run.bin_s;
  t.drive_bins = run.drive_bins;
  const size_t bins = run.drive_bins.empty() ? 0 : run.drive_bins[0].size();
  t.plot_bin_s = run.bin_s > 0 ? auto_bin_s(bins, run.bin_s) : 0.01;
  for (const auto& d : run.drive_bins) {
    t.drive_mb_s.push_back(rebin_drive_bins(d, run.bin_s, t.plot_bin_s));
    for (uint64_t b : d) t.drive_bytes += b;
  }
  return t;
}

StepSeries step_series(const RunResult& run) {
  StepSeries s;
  for (const PromptRun& p : run.prompts)
    for (const StepStats& st : p.steps) {
      if (st.prefill) {
        ++s.prefill_passes;
        s.prefill_ms += st.ms;
        continue;
      }
      s.ms.push_back(st.ms);
      s.wait_ms.push_back(st.wait_ms);
      s.demanded.push_back(st.demanded);
      s.hits.push_back(st.hits);
      s.prefetch_hits.push_back(st.prefetch_hits);
    }
  return s;
}

std::vector<std::string> write_bench_svgs(const BenchResult& r, const std::string& prefix,
                                          std::vector<std::string>* notes) {
  std::vector<std::string> written;
  const RunResult* run = last_measured_run(r, 0);
  if (!run) return written;
  auto put = [&](const std::string& suffix, const std::string& svg) {
    write_file_atomic(prefix + suffix, svg);
    written.push_back(prefix + suffix);
  };
  const std::string which = cat("bench, last measured run (", run->index + 1, ") of A, ", r.prompts.size(),
                                " prompts one after another");
  if (run->drive_bins.empty()) {
    if (notes) notes->push_back("no drives picture: the model is resident (no expert reads)");
  } else {
    svg::LineChart c = drives_chart(drive_summary(*run));
    c.note = which + "; " + c.note;
    put("-drives.svg", c.svg());
  }
  const StepSeries steps = step_series(*run);
  svg::StackedBarChart s = steps_chart(steps);
  s.note = which + "; " + s.note;
  put("-steps.svg", s.svg());
  svg::LineChart h = hits_chart(steps);
  h.note = which + "; " + h.note;
  put("-hits.svg", h.svg());
  return written;
}

ScalingPoint read_scaling_point(const std::string& json_path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(json_path));
  } catch (const nlohmann::json::exception& e) {
    fail(json_path, ": not JSON: ", e.what());
  }
  ScalingPoint p;
  p.file = json_path;
  if (!j.contains("drives") || !j["drives"].is_number()) fail(json_path, ": no \"drives\" (not a bench --json file?)");
  p.drives = j["drives"].get<double>();
  if (p.drives < 1) fail(json_path, ": \"drives\" is ", p.drives, ": a resident run has no drives to scale over");
  const nlohmann::json* m = nullptr;
  if (j.contains("summary") && j["summary"].contains("A") && j["summary"]["A"].contains("drives_total_mb_s"))
    m = &j["summary"]["A"]["drives_total_mb_s"];
  if (!m) fail(json_path, ": no summary.A.drives_total_mb_s");
  for (const char* k : {"median", "min", "max"})
    if (!m->contains(k) || !(*m)[k].is_number()) fail(json_path, ": summary.A.drives_total_mb_s.", k, " is not a number");
  p.median_mb_s = (*m)["median"].get<double>();
  p.min_mb_s = (*m)["min"].get<double>();
  p.max_mb_s = (*m)["max"].get<double>();
  return p;
}

svg::LineChart scaling_chart(std::vector<ScalingPoint> points) {
  if (points.empty()) fail("bench-chart --scaling: give at least one bench --json file");
  std::sort(points.begin(), points.end(), [](const ScalingPoint& a, const ScalingPoint& b) { return a.drives < b.drives; });
  // The ideal: the fewest-drive bench's MB/s per drive, times N.
  const double per_drive = points[0].median_mb_s / points[0].drives;
  svg::LineChart c;
  c.title = "Read bandwidth vs number of drives";
  c.note = cat(points.size(), " benches; median over each bench's measured runs, min and max as dots; ideal = N x ",
               num(per_drive), " MB/s (", num(points[0].drives), "-drive bench per drive)");
  c.x_label = "drives";
  c.y_label = "aggregate read bandwidth (MB/s)";
  c.y_from_zero = true;
  c.x_min = 0;
  c.x_max = points.back().drives + 1;
  svg::Series med{"measured (median)", {}, svg::Style::Line, ""}, range{"min / max of runs", {}, svg::Style::Points, ""},
      ideal{"ideal: N x one drive", {}, svg::Style::Line, "#999999"};
  for (const ScalingPoint& p : points) {
    med.points.push_back({p.drives, p.median_mb_s});
    range.points.push_back({p.drives, p.min_mb_s});
    range.points.push_back({p.drives, p.max_mb_s});
  }
  ideal.points = {{0, 0}, {points.back().drives + 1, per_drive * (points.back().drives + 1)}};
  c.series = {ideal, med, range};
  return c;
}

}  // namespace deltafin
