#include "engine/speculative_generate.h"
#include "bench/bench_runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "bench/run_report.h"
#include "experts/memory_plan.h"
#include "platform/files.h"
#include "store/store_manifest.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

// --- prompts ------------------------------------------------------------------

std::vector<BenchPrompt> builtin_prompts(int64_t vocab) {
  if (vocab < 2) fail("bench: the model's vocabulary (", vocab, ") is too small for the built-in prompts");
  std::vector<BenchPrompt> out;
  uint64_t x = 0x9e3779b97f4a7c15ull;  // fixed: every run and machine gets the same prompts
  for (size_t len : {4, 16, 64}) {
    BenchPrompt p;
    p.name = cat("builtin-", len);
    for (size_t i = 0; i < len; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      p.ids.push_back(static_cast<uint32_t>((x >> 33) % static_cast<uint64_t>(vocab)));
    }
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

bool looks_like_ids(const std::string& line) {
  bool digit = false;
  for (char c : line) {
    if (c >= '0' && c <= '9') digit = true;
    else if (c != ',' && c != ' ' && c != '\t') return false;
  }
  return digit;
}

std::vector<uint32_t> parse_ids(const std::string& line, const std::string& where, int64_t vocab) {
  std::vector<uint32_t> ids;
  std::stringstream ss(line);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) fail(where, ": an empty token id between commas");
    const std::string num = item.substr(b, e - b + 1);
    if (num.find_first_of(" \t") != std::string::npos) fail(where, ": \"", num, "\" is not one token id (missing comma?)");
    if (num.size() > 10) fail(where, ": token id ", num, " is out of range");
    const uint64_t v = std::stoull(num);
    if (static_cast<int64_t>(v) >= vocab) fail(where, ": token id ", v, " is not below the vocabulary size ", vocab);
    ids.push_back(static_cast<uint32_t>(v));
  }
  return ids;
}

}  // namespace

std::vector<BenchPrompt> read_prompts_file(const std::string& path,
                                           const std::function<std::vector<uint32_t>(const std::string&)>& encode,
                                           int64_t vocab) {
  const std::string text = read_text_file(path);
  std::vector<BenchPrompt> out;
  std::stringstream ss(text);
  std::string line;
  for (size_t n = 1; std::getline(ss, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = cat("--prompts ", path, ":", n);
    BenchPrompt p;
    p.name = cat(path.substr(path.find_last_of('/') + 1), ":", n);
    p.ids = looks_like_ids(line) ? parse_ids(line, where, vocab) : encode(line);
    if (p.ids.empty()) fail(where, ": the line encodes to no tokens");
    out.push_back(std::move(p));
  }
  if (out.empty()) fail("--prompts ", path, ": no prompts (one per line: token ids \"1,2,3\" or text)");
  return out;
}

// --- statistics ---------------------------------------------------------------

namespace {
double median_of_sorted(const std::vector<double>& v) {
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
}  // namespace

Spread spread_of(std::vector<double> values) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  Spread s;
  s.n = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.min = values.front();
  s.max = values.back();
  s.median = median_of_sorted(values);
  std::vector<double> dev;
  for (double v : values) dev.push_back(std::fabs(v - s.median));
  std::sort(dev.begin(), dev.end());
  s.mad = median_of_sorted(dev);
  return s;
}

// --- one run ------------------------------------------------------------------

std::vector<std::vector<uint32_t>> run_tokens(const RunResult& r) {
  std::vector<std::vector<uint32_t>> out;
  for (const PromptRun& p : r.prompts) out.push_back(p.tokens);
  return out;
}

std::optional<TokenMismatch> first_difference(const std::vector<std::vector<uint32_t>>& reference,
                                              const std::vector<std::vector<uint32_t>>& got) {
  const size_t prompts = std::max(reference.size(), got.size());
  static const std::vector<uint32_t> none;
  for (size_t p = 0; p < prompts; ++p) {
    const auto& a = p < reference.size() ? reference[p] : none;
    const auto& b = p < got.size() ? got[p] : none;
    const size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
      // Widened first: a uint32_t ?: -1 would wrap the -1 to 4294967295.
      const int64_t x = i < a.size() ? static_cast<int64_t>(a[i]) : -1, y = i < b.size() ? static_cast<int64_t>(b[i]) : -1;
      if (x == y) continue;
      TokenMismatch m;
      m.prompt = p, m.position = i, m.expected = x, m.got = y;
      return m;
    }
  }
  return std::nullopt;
}

std::vector<Metric> run_metrics(const std::vector<PromptRun>& prompts, const DriveWindow& drives, double wall_s,
                                uint64_t peak_rss) {
  double decode_ms = 0, ttft_ms = 0, compute_ms = 0, wait_ms = 0, prefill_ms = 0;
  uint64_t decode_steps = 0, decode_bytes = 0, demanded = 0, hits = 0, pilot_hits = 0, pilot_actual = 0;
  std::vector<double> layer_expert_ms, layer_wait_ms;  // summed over decode steps, per layer
  uint64_t prefill_read = 0, prefill_unique = 0, prefill_positions = 0, tokens = 0;
  for (const PromptRun& p : prompts) {
    ttft_ms += p.gen.ttft_seconds * 1e3;
    tokens += p.tokens.size();
    prefill_read += p.prefill.bytes_read;
    prefill_unique += p.prefill.unique_bytes;
    prefill_positions += static_cast<uint64_t>(p.gen.prompt_tokens);
    prefill_ms += p.gen.prefill_seconds * 1e3;
    for (const StepStats& s : p.steps) {
      if (s.prefill) continue;
      ++decode_steps;
      decode_ms += s.ms;
      // The two clocks are read apart, so waiting can exceed the step by a hair.
      const double w = std::min(s.wait_ms, s.ms);
      wait_ms += w;
      compute_ms += s.ms - w;
      decode_bytes += s.bytes_read;
      demanded += s.demanded, hits += s.hits;
      pilot_hits += s.pilot_hits, pilot_actual += s.pilot_actual;
      if (layer_expert_ms.size() < s.layer_expert_ms.size()) {
        layer_expert_ms.resize(s.layer_expert_ms.size(), 0.0);
        layer_wait_ms.resize(s.layer_expert_ms.size(), 0.0);
      }
      for (size_t l = 0; l < s.layer_expert_ms.size(); ++l) {
        layer_expert_ms[l] += s.layer_expert_ms[l];
        layer_wait_ms[l] += std::min(s.layer_wait_ms[l], s.layer_expert_ms[l]);
      }
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto per = [&](double a, double b) { return b > 0 ? a / b : nan; };
  const double n = static_cast<double>(prompts.size());
  std::vector<Metric> m = {
      {"decode_tokens_per_s", "tokens/s", per(1e3 * decode_steps, decode_ms)},
      {"ttft_ms", "ms (mean over prompts)", per(ttft_ms, n)},
      {"prefill_tokens_per_s", "tokens/s", per(1e3 * prefill_positions, prefill_ms)},
      {"bytes_read_per_token", "bytes/decode token", per(static_cast<double>(decode_bytes), decode_steps)},
      {"prefill_amplification", "read / unique expert bytes", per(static_cast<double>(prefill_read), prefill_unique)},
      {"hit_rate", "hits / experts demanded (decode)", per(static_cast<double>(hits), demanded)},
      {"lookahead_recall", "predicted / routed (decode)", per(static_cast<double>(pilot_hits), pilot_actual)},
      {"compute_ms_per_token", "ms/decode token", per(compute_ms, decode_steps)},
      {"wait_ms_per_token", "ms/decode token", per(wait_ms, decode_steps)},
      {"wait_fraction", "waiting / decode time", per(wait_ms, decode_ms)},
      {"generated_tokens", "tokens", static_cast<double>(tokens)},
      {"wall_s", "s", wall_s},
      {"peak_rss_bytes", "bytes (process high-water mark)", static_cast<double>(peak_rss)},
  };
  double total = 0;
  for (size_t d = 0; d < drives.mb_s.size(); ++d) {
    m.push_back({cat("drive", d, "_mb_s"), "MB/s over the run", drives.mb_s[d]});
    m.push_back({cat("drive", d, "_busy"), "time with a read in flight / run", drives.busy[d]});
    m.push_back({cat("drive", d, "_bins_active"), "10 ms bins with bytes / run's bins", drives.bins_active[d]});
    total += drives.mb_s[d];
  }
  if (!drives.mb_s.empty()) m.push_back({"drives_total_mb_s", "MB/s over the run", total});
  // Per MoE layer: the expert phase split into compute and waiting for reads
  // (streamed stores only; layers without routed experts have no phase).
  for (size_t l = 0; l < layer_expert_ms.size(); ++l) {
    if (layer_expert_ms[l] <= 0) continue;
    m.push_back({cat(kLayerMetricPrefix, l, "_compute_ms"), "ms/decode token", per(layer_expert_ms[l] - layer_wait_ms[l], decode_steps)});
    m.push_back({cat(kLayerMetricPrefix, l, "_wait_ms"), "ms/decode token", per(layer_wait_ms[l], decode_steps)});
  }
  return m;
}

RunResult measure_run(LoadedModel& model, const std::vector<BenchPrompt>& prompts, const BenchOptions& options) {
  RunResult r;
  Monitor* mon = model.monitor.get();
  const std::vector<DriveCounters> before = mon ? mon->drive_counters() : std::vector<DriveCounters>{};
  const double start_s = mon ? mon->now() : 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const BenchPrompt& prompt : prompts) {
    for (uint32_t id : prompt.ids)
      if (id >= model.summary().vocab)
        fail("bench: prompt ", prompt.name, ": token id ", id, " is not below the vocabulary size ", model.summary().vocab);
    PromptRun pr;
    std::unique_ptr<ModelSession> session = model.causal().new_session();  // fresh: no state carried from the previous prompt
    RunStatsCollector collector(model);
    GenerateParams p;
    p.max_new = options.max_new;
    p.eos = model.eos;
    p.ignore_eos = true;  // a fixed token count, so runs are comparable
    p.observer = &collector;
    p.prefill_chunk = options.prefill_chunk;
    p.prefill_group = options.prefill_group;
    pr.gen = generate_speculative(model.causal(), *session, prompt.ids, p, SpecParams{}, nullptr, [&](uint32_t id) { pr.tokens.push_back(id); });
    pr.steps = collector.steps();
    pr.prefill = collector.prefill_totals();
    r.prompts.push_back(std::move(pr));
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DriveWindow w;
  if (mon) {
    const double end_s = mon->now();
    const std::vector<DriveCounters> after = mon->drive_counters();
    const auto bins = mon->drive_bins();
    r.bin_s = mon->bin_seconds();
    const size_t b0 = static_cast<size_t>(start_s / r.bin_s), b1 = static_cast<size_t>(std::ceil(end_s / r.bin_s));
    for (size_t d = 0; d < after.size(); ++d) {
      w.mb_s.push_back(r.wall_s > 0 ? (after[d].bytes - before[d].bytes) / r.wall_s / 1e6 : 0.0);
      w.busy.push_back(r.wall_s > 0 ? std::min(1.0, (after[d].busy_s - before[d].busy_s) / r.wall_s) : 0.0);
      std::vector<uint64_t> slice;
      size_t active = 0;
      for (size_t i = b0; i < std::max(b1, b0 + 1); ++i) {
        const uint64_t v = d < bins.size() && i < bins[d].size() ? bins[d][i] : 0;
        slice.push_back(v);
        active += v > 0;
      }
      // The edge bins are shared with what ran just before and after, so a
      // drive idle during the run can still show a bin or two.
      w.bins_active.push_back(static_cast<double>(active) / static_cast<double>(slice.size()));
      r.drive_bins.push_back(std::move(slice));
    }
  }
  r.metrics = run_metrics(r.prompts, w, r.wall_s, peak_rss_bytes());
  return r;
}

// --- the whole benchmark --------------------------------------------------------

void check_tokens(BenchResult& r) {
  r.mismatches.clear();
  if (r.runs.empty()) return;
  const auto reference = run_tokens(r.runs[0]);
  for (RunResult& run : r.runs) {
    run.correct = true;
    if (auto m = first_difference(reference, run_tokens(run))) {
      m->run = run.index;
      m->config = run.config;
      run.correct = false;
      r.mismatches.push_back(*m);
    }
  }
}

namespace {
std::vector<const RunResult*> measured(const BenchResult& r, int config) {
  std::vector<const RunResult*> out;
  for (const RunResult& run : r.runs)
    if (run.config == config && !run.warmup) out.push_back(&run);
  return out;
}

double metric_value(const RunResult& run, const std::string& name) {
  for (const Metric& m : run.metrics)
    if (m.name == name) return m.value;
  return std::numeric_limits<double>::quiet_NaN();
}
}  // namespace

std::vector<MetricSummary> summarize(const BenchResult& r, int config) {
  std::vector<MetricSummary> out;
  const auto runs = measured(r, config);
  if (runs.empty()) return out;
  for (const Metric& m : runs[0]->metrics) {
    std::vector<double> v;
    for (const RunResult* run : runs)
      if (run->correct) v.push_back(metric_value(*run, m.name));  // a wrong run is not averaged
    out.push_back({m.name, m.unit, spread_of(v)});
  }
  return out;
}

std::vector<MetricSummary> summarize_ratios(const BenchResult& r) {
  std::vector<MetricSummary> out;
  const auto a = measured(r, 0), b = measured(r, 1);
  if (a.empty() || b.empty()) return out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Metric& m : a[0]->metrics) {
    std::vector<double> v;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (!a[i]->correct || !b[i]->correct) continue;
      const double x = metric_value(*a[i], m.name), y = metric_value(*b[i], m.name);
      v.push_back(x != 0 && !std::isnan(x) && !std::isnan(y) ? y / x : nan);
    }
    out.push_back({m.name, "B / A", spread_of(v)});
  }
  return out;
}

std::string drop_expert_page_cache(const std::string& store_dir) {
  const StoreManifest m = load_store_manifest(store_dir);
  size_t dropped = 0, missing = 0, failed = 0;
  for (int64_t l = 0; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e)
      for (uint16_t d : m.entry(l, e).drives) {
        const std::string path = m.file_on_drive(d, l, e);  // a stripe in a striped store
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          ++missing;  // a streamed store's expert not fetched yet: nothing cached
          continue;
        }
        if (platform::drop_page_cache(fd, 0, 0) == 0) ++dropped;
        else ++failed;
        ::close(fd);
      }
  if (!platform::can_drop_page_cache())
    return cat("page cache NOT dropped: this system has no posix_fadvise DONTNEED (", dropped + failed,
               " expert files left as they are); cold runs read what is cached");
  return cat("page cache dropped (posix_fadvise DONTNEED) for ", dropped, " expert files",
             missing ? cat(", ", missing, " not on the drives") : std::string(),
             failed ? cat(", ", failed, " refused") : std::string());
}

BenchResult run_bench(std::vector<BenchConfig> configs, const PromptMaker& make_prompts, const BenchOptions& options,
                      const std::function<void(const std::string&)>& progress) {
  if (configs.empty() || configs.size() > 2) fail("bench: one or two configurations, not ", configs.size());
  if (options.runs < 1) fail("--runs must be at least 1, not ", options.runs);
  if (options.warmup < 0) fail("--warmup must be 0 or more, not ", options.warmup);
  if (options.max_new < 1) fail("--max-new must be at least 1, not ", options.max_new);
  BenchResult r;
  r.options = options;
  // Warm: each configuration is loaded once and kept, so its cache carries
  // from run to run like a long-running server's (both stay loaded with --vs:
  // reloading per run would make every run cold). Cold: loaded per run.
  std::vector<std::unique_ptr<LoadedModel>> models(configs.size());
  auto describe = [&](size_t c, LoadedModel& m) {
    (c == 0 ? r.describe_a : r.describe_b) = describe_model(m.info());
    if (c == 0) r.drives = m.manifest ? m.manifest->drives.size() : 0;
    if (r.prompts.empty()) r.prompts = make_prompts(m);
  };
  if (!options.cold)
    for (size_t c = 0; c < configs.size(); ++c) {
      models[c] = configs[c].load();
      describe(c, *models[c]);
    }
  const int total = options.warmup + options.runs;
  for (int round = 0; round < total; ++round)
    for (size_t c = 0; c < configs.size(); ++c) {
      double load_s = 0;
      if (options.cold) {
        for (auto& m : models) m.reset();  // the previous model (and its cache) goes first
        if (!configs[c].store_dir.empty()) r.cold_note = drop_expert_page_cache(configs[c].store_dir);
        const auto t0 = std::chrono::steady_clock::now();
        models[c] = configs[c].load();
        load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        describe(c, *models[c]);
      }
      RunResult run = measure_run(*models[c], r.prompts, options);
      run.config = static_cast<int>(c);
      run.index = r.runs.size();
      run.warmup = round < options.warmup;
      run.load_s = load_s;
      if (progress)
        progress(cat(run.warmup ? "warm-up" : "run", " ", run.warmup ? round + 1 : round - options.warmup + 1, " (",
                     configs[c].label, "): ", static_cast<int64_t>(run.wall_s * 1e3 + 0.5), " ms"));
      r.runs.push_back(std::move(run));
    }
  for (BenchConfig& c : configs) c.load = nullptr;
  r.configs = std::move(configs);
  check_tokens(r);
  return r;
}

}  // namespace deltafin
