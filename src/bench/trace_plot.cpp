#include "bench/trace_plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/file.h"
#include "util/progress.h"

namespace deltafin {

using nlohmann::json;

namespace {

constexpr int64_t kMaxDrives = 4096;  // a bound on the drive index a trace may name

// --- strict field access: every problem names where it is -------------------

const json& field(const json& j, const char* name, const std::string& where) {
  auto it = j.find(name);
  if (it == j.end()) fail(where, ": missing \"", name, "\"");
  return *it;
}

double number(const json& j, const char* name, const std::string& where) {
  const json& v = field(j, name, where);
  if (!v.is_number()) fail(where, ": \"", name, "\" is not a number: ", v.dump());
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(where, ": \"", name, "\" is not finite");
  return d;
}

int64_t integer(const json& j, const char* name, const std::string& where) {
  const json& v = field(j, name, where);
  if (!v.is_number_integer()) fail(where, ": \"", name, "\" is not an integer: ", v.dump());
  return v.get<int64_t>();
}

uint64_t count(const json& j, const char* name, const std::string& where) {
  const json& v = field(j, name, where);
  if (!v.is_number_unsigned()) fail(where, ": \"", name, "\" is not a count (an integer >= 0): ", v.dump());
  return v.get<uint64_t>();
}

bool boolean(const json& j, const char* name, const std::string& where) {
  const json& v = field(j, name, where);
  if (!v.is_boolean()) fail(where, ": \"", name, "\" is not true or false: ", v.dump());
  return v.get<bool>();
}

std::string ms_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds * 1e3);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// --- the trace's records ------------------------------------------------------

PointReducer& series(TraceSummary& t, const std::string& name) {
  for (auto& [n, r] : t.latency_ms)
    if (n == name) return r;
  t.latency_ms.emplace_back(name, PointReducer());
  return t.latency_ms.back().second;
}

std::string read_kind(bool prefetch, bool promoted) {
  if (!prefetch) return "demand reads";
  return promoted ? "prefetches, then demanded" : "prefetches";
}

// A "read" or "hit" line: every field the monitor writes must be there and typed.
void add_read(TraceSummary& t, const json& j, bool hit, ReadsBy by, const std::string& where) {
  integer(j, "layer", where);
  integer(j, "expert", where);
  const int64_t drive = integer(j, "drive", where);
  const json& drives = field(j, "drives", where);
  if (!drives.is_array()) fail(where, ": \"drives\" is not an array");
  const bool prefetch = boolean(j, "prefetch", where), promoted = boolean(j, "promoted", where);
  const bool ok = boolean(j, "ok", where), cancelled = boolean(j, "cancelled", where);
  const double enqueue_s = number(j, "enqueue_s", where), end_s = number(j, "end_s", where);
  number(j, "start_s", where);
  const uint64_t bytes = count(j, "bytes", where);
  if (hit) {
    ++t.hits;
    return;
  }
  ++t.reads;
  // Neither has a latency worth drawing: counted in the picture's note.
  if (cancelled) {
    ++t.cancelled;
    return;
  }
  if (!ok) {
    ++t.failed;
    return;
  }
  t.read_bytes += bytes;
  ++(prefetch ? t.prefetch_reads : t.demand_reads);
  if (by == ReadsBy::Drive && drive >= 0 && drive < kMaxDrives)  // series i is drive i: the drives picture's colors
    for (int64_t d = static_cast<int64_t>(t.latency_ms.size()); d <= drive; ++d) series(t, cat("drive ", d));
  const std::string name = by == ReadsBy::Kind ? read_kind(prefetch, promoted) : cat("drive ", drive);
  series(t, name).add(end_s, (end_s - enqueue_s) * 1e3);
}

// A "drive_bins" line: one drive's bytes per bin, re-binned for the picture.
void add_drive_bins(TraceSummary& t, const json& j, std::vector<bool>& seen, const std::string& where) {
  const int64_t drive = integer(j, "drive", where);
  if (drive < 0 || drive >= kMaxDrives) fail(where, ": drive ", drive, " is out of range");
  const double bin_s = number(j, "bin_s", where);
  if (bin_s < 1e-6 || bin_s > 3600) fail(where, ": \"bin_s\" ", bin_s, " is not a bin width in seconds");
  if (t.bin_s == 0) t.bin_s = bin_s;
  if (std::fabs(bin_s - t.bin_s) > 1e-12) fail(where, ": bin_s ", bin_s, " differs from the earlier lines' ", t.bin_s);
  const json& arr = field(j, "bytes", where);
  if (!arr.is_array()) fail(where, ": \"bytes\" is not an array");
  std::vector<uint64_t> bytes;
  bytes.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_number_unsigned()) fail(where, ": bytes[", i, "] is not a byte count: ", arr[i].dump());
    bytes.push_back(arr[i].get<uint64_t>());
    t.drive_bytes += bytes.back();
  }
  const auto d = static_cast<size_t>(drive);
  if (seen.size() <= d) seen.resize(d + 1, false), t.drive_bins.resize(d + 1);
  if (seen[d]) fail(where, ": a second drive_bins line for drive ", drive);
  seen[d] = true;
  t.drive_bins[d] = std::move(bytes);
}

void add_line(TraceSummary& t, const std::string& line, std::vector<bool>& seen, ReadsBy by, const std::string& where) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::parse_error& e) {
    fail(where, ": not JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail(where, ": not a JSON object");
  const json& type = field(j, "t", where);
  if (type == "read" || type == "hit") add_read(t, j, type == "hit", by, where);
  else if (type == "drive_bins") add_drive_bins(t, j, seen, where);
  else fail(where, ": unknown record type ", type.dump(), " (expected \"read\", \"hit\" or \"drive_bins\")");
}

// MB/s per plotted bin, every drive's series the same length so the total
// adds like with like.
void finish_drives(TraceSummary& t, const std::vector<bool>& seen, double plot_bin_ms, const std::string& path) {
  for (size_t d = 0; d < seen.size(); ++d)
    if (!seen[d]) fail(path, ": no drive_bins line for drive ", d, " (but one for drive ", seen.size() - 1, ")");
  size_t bins = 0;
  for (const auto& v : t.drive_bins) bins = std::max(bins, v.size());
  for (auto& v : t.drive_bins) v.resize(bins, 0);
  if (t.drive_bins.empty()) return;
  t.plot_bin_s = plot_bin_ms > 0 ? plot_bin_ms / 1e3 : auto_bin_s(bins, t.bin_s);
  for (const auto& v : t.drive_bins)
    t.drive_mb_s.push_back(with_context(path, [&] { return rebin_drive_bins(v, t.bin_s, t.plot_bin_s); }));
}

}  // namespace

// --- re-binning and the reducer --------------------------------------------------

std::vector<double> rebin_drive_bins(const std::vector<uint64_t>& bytes, double bin_s, double new_bin_s) {
  if (!(bin_s > 0)) fail("the bin width ", bin_s, " s is not positive");
  const double ratio = new_bin_s / bin_s;
  const long long k = ratio >= 0.5 && ratio <= 1e9 ? std::llround(ratio) : 0;
  if (k < 1 || std::fabs(ratio - static_cast<double>(k)) > 1e-6 * ratio)
    fail("cannot re-bin the trace's ", ms_text(bin_s), " ms bins into ", ms_text(new_bin_s),
         " ms bins: the new width must be a whole multiple of the trace's");
  const double width = static_cast<double>(k) * bin_s;
  std::vector<double> out;
  for (size_t i = 0; i < bytes.size(); i += static_cast<size_t>(k)) {
    uint64_t sum = 0;
    for (size_t j = i; j < std::min(bytes.size(), i + static_cast<size_t>(k)); ++j) sum += bytes[j];
    out.push_back(static_cast<double>(sum) / width / 1e6);
  }
  return out;
}

double auto_bin_s(size_t trace_bins, double bin_s) {
  const auto widest = std::max<long long>(1, std::llround(0.1 / bin_s));  // 100 ms
  const auto k = std::clamp<long long>(static_cast<long long>(trace_bins / 100), 1, widest);
  return static_cast<double>(k) * bin_s;
}

PointReducer::PointReducer(size_t raw_cap, size_t buckets) : raw_cap_(raw_cap) {
  buckets = std::max<size_t>(2, buckets + buckets % 2);  // even, so pairs merge evenly
  lo_.assign(buckets, std::numeric_limits<double>::infinity());
  hi_.assign(buckets, -std::numeric_limits<double>::infinity());
}

void PointReducer::add(double x, double y) {
  if (!std::isfinite(x) || !std::isfinite(y)) return;
  x = std::max(x, 0.0);
  ++count_;
  if (!overflowed_) {
    if (raw_.size() < raw_cap_) {
      raw_.push_back({x, y});
    } else {  // from now on only the buckets: memory stays bounded
      overflowed_ = true;
      raw_.clear();
      raw_.shrink_to_fit();
    }
  }
  const size_t n = lo_.size();
  while (x >= bucket_s_ * static_cast<double>(n)) {  // widen: merge pairs, double the width
    for (size_t i = 0; i < n / 2; ++i) {
      lo_[i] = std::min(lo_[2 * i], lo_[2 * i + 1]);
      hi_[i] = std::max(hi_[2 * i], hi_[2 * i + 1]);
    }
    std::fill(lo_.begin() + static_cast<long>(n / 2), lo_.end(), std::numeric_limits<double>::infinity());
    std::fill(hi_.begin() + static_cast<long>(n / 2), hi_.end(), -std::numeric_limits<double>::infinity());
    bucket_s_ *= 2;
  }
  const size_t b = std::min(n - 1, static_cast<size_t>(x / bucket_s_));
  lo_[b] = std::min(lo_[b], y);
  hi_[b] = std::max(hi_[b], y);
}

std::vector<svg::Point> PointReducer::points() const {
  if (!overflowed_) return raw_;
  std::vector<svg::Point> out;
  for (size_t b = 0; b < lo_.size(); ++b) {
    if (lo_[b] > hi_[b]) continue;
    const double x = (static_cast<double>(b) + 0.5) * bucket_s_;
    out.push_back({x, lo_[b]});
    out.push_back({x, hi_[b]});
  }
  return out;
}

// --- reading ---------------------------------------------------------------------

TraceSummary read_trace(const std::string& path, double plot_bin_ms, ReadsBy by) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the trace: ", std::strerror(errno));
  TraceSummary t;
  if (by == ReadsBy::Kind)  // fixed order, demand reads last so they are drawn on top
    for (const char* name : {"prefetches", "prefetches, then demanded", "demand reads"}) series(t, name);
  std::vector<bool> seen;
  std::string line;
  while (std::getline(in, line)) {
    ++t.lines;
    add_line(t, line, seen, by, cat(path, " line ", t.lines));
  }
  if (in.bad()) fail(path, ": reading the trace failed after line ", t.lines);
  if (t.lines == 0) fail(path, ": the trace is empty");
  finish_drives(t, seen, plot_bin_ms, path);
  return t;
}

StepSeries read_stats(const std::string& path) {
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const json::parse_error& e) {
    fail(path, ": not JSON (", e.what(), ")");
  }
  if (!j.is_object() || !j.contains("steps") || !j["steps"].is_array())
    fail(path, ": no \"steps\" array (is this a `run --stats-json` file?)");
  StepSeries s;
  const json& steps = j["steps"];
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string where = cat(path, ": steps[", i, "]");
    const json& step = steps[i];
    if (!step.is_object()) fail(where, ": not an object");
    const double ms = number(step, "ms", where);
    if (boolean(step, "prefill", where)) {
      ++s.prefill_passes;
      s.prefill_ms += ms;
      continue;
    }
    s.ms.push_back(ms);
    s.wait_ms.push_back(number(step, "wait_ms", where));
    s.demanded.push_back(count(step, "demanded", where));
    s.hits.push_back(count(step, "hits", where));
    s.prefetch_hits.push_back(count(step, "prefetch_hits", where));
  }
  return s;
}

// --- pictures ----------------------------------------------------------------------

svg::LineChart drives_chart(const TraceSummary& t) {
  svg::LineChart c;
  const size_t drives = t.drive_mb_s.size(), bins = drives ? t.drive_mb_s[0].size() : 0;
  const double seconds = static_cast<double>(bins) * t.plot_bin_s;
  std::vector<double> total(bins, 0.0);
  for (const auto& d : t.drive_mb_s)
    for (size_t i = 0; i < bins; ++i) total[i] += d[i];
  const double peak = total.empty() ? 0.0 : *std::max_element(total.begin(), total.end());
  c.title = "Read bandwidth per drive";
  c.note = cat(ms_text(t.plot_bin_s), " ms bins; ", drives, drives == 1 ? " drive, " : " drives, ",
               human_bytes(static_cast<double>(t.drive_bytes)), " read in ", fixed(seconds, 2), " s (mean ",
               fixed(seconds > 0 ? t.drive_bytes / seconds / 1e6 : 0.0, 0), " MB/s, peak ", fixed(peak, 0), " MB/s)");
  c.x_label = "time since the run started (s)";
  c.y_label = "read bandwidth (MB/s)";
  c.y_from_zero = true;
  c.x_min = 0;
  c.x_max = std::max(seconds, t.plot_bin_s);
  auto points = [&](const std::vector<double>& v) {
    std::vector<svg::Point> p;
    p.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) p.push_back({(static_cast<double>(i) + 0.5) * t.plot_bin_s, v[i]});
    return p;
  };
  for (size_t d = 0; d < drives; ++d) c.series.push_back({cat("drive ", d), points(t.drive_mb_s[d]), svg::Style::Line, ""});
  if (drives > 1) c.series.push_back({"all drives", points(total), svg::Style::Line, "#333333"});
  return c;
}

namespace {
// By kind: demand reads (what the engine waits on) in red, on top.
std::string read_color(ReadsBy by, size_t series) {
  if (by == ReadsBy::Drive) return svg::palette(series);  // as in the drives picture
  static const char* const kinds[] = {"#4e79a7", "#f28e2b", "#e15759"};
  return kinds[series % 3];
}
}  // namespace

svg::LineChart reads_chart(const TraceSummary& t, ReadsBy by) {
  svg::LineChart c;
  c.title = by == ReadsBy::Kind ? "Expert read latency: demand reads vs prefetches" : "Expert read latency per drive";
  c.note = cat(t.reads, " reads (", t.demand_reads, " on demand, ", t.prefetch_reads, " prefetches, ",
               human_bytes(static_cast<double>(t.read_bytes)), "), ", t.hits, " cache hits; ", t.failed, " failed and ",
               t.cancelled, " cancelled reads not drawn");
  c.x_label = "time the read completed (s)";
  c.y_label = "latency, queued to done (ms)";
  c.y_from_zero = true;
  c.x_min = 0;
  for (size_t i = 0; i < t.latency_ms.size(); ++i) {
    const auto& [name, reducer] = t.latency_ms[i];
    if (reducer.count() == 0) continue;  // kept its slot, so the colors stay put
    c.series.push_back({cat(name, " (", reducer.count(), ")"), reducer.points(), svg::Style::Points, read_color(by, i)});
  }
  return c;
}

svg::StackedBarChart steps_chart(const StepSeries& s) {
  svg::StackedBarChart c;
  const size_t n = s.ms.size();
  double ms = 0, wait = 0;
  for (size_t i = 0; i < n; ++i) {
    // The clocks are read apart, so waiting can exceed the step by a hair.
    const double w = std::min(s.wait_ms[i], s.ms[i]);
    c.bars.push_back({s.ms[i] - w, w});
    ms += s.ms[i], wait += w;
  }
  c.title = "Time per decoded token: compute vs waiting for reads";
  c.note = cat(n, " tokens, mean ", fixed(n ? ms / n : 0, 1), " ms of which ", fixed(n ? wait / n : 0, 1),
               " ms waiting; prefill (", s.prefill_passes, s.prefill_passes == 1 ? " pass, " : " passes, ",
               fixed(s.prefill_ms, 1), " ms) not drawn");
  c.components = {"compute", "waiting for reads"};
  c.x_label = "decoded token";
  c.y_label = "time (ms)";
  c.first_x = 1;
  c.bar_name = "token";
  return c;
}

svg::LineChart hits_chart(const StepSeries& s) {
  svg::LineChart c;
  svg::Series hits{"hits", {}, svg::Style::Line, ""}, pre{"hits on prefetched experts", {}, svg::Style::Line, ""};
  uint64_t demanded = 0, hit = 0, prefetched = 0;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = 0; i < s.demanded.size(); ++i) {
    const double x = static_cast<double>(i + 1), d = static_cast<double>(s.demanded[i]);
    // A token that routed to no streamed expert has no rate: a gap, not a 0.
    hits.points.push_back({x, d > 0 ? 100.0 * s.hits[i] / d : nan});
    pre.points.push_back({x, d > 0 ? 100.0 * s.prefetch_hits[i] / d : nan});
    demanded += s.demanded[i], hit += s.hits[i], prefetched += s.prefetch_hits[i];
  }
  c.title = "Expert cache hit rate per decoded token";
  c.note = cat("hits / experts the token routed to; overall ", fixed(demanded ? 100.0 * hit / demanded : 0, 1), "% (",
               hit, " of ", demanded, "), ", fixed(demanded ? 100.0 * prefetched / demanded : 0, 1),
               "% on prefetched experts");
  c.x_label = "decoded token";
  c.y_label = "hit rate (%)";
  c.series = {hits, pre};
  c.y_from_zero = true;
  c.y_max = 100;
  c.x_min = 1;
  c.x_max = std::max<double>(2, static_cast<double>(s.demanded.size()));
  return c;
}

std::vector<std::string> write_trace_plots(const TracePlotOptions& o, std::vector<std::string>* notes) {
  // Everything is read (and checked) before anything is written.
  const TraceSummary t = read_trace(o.trace, o.bin_ms, o.reads_by);
  StepSeries steps;
  if (!o.stats.empty()) steps = read_stats(o.stats);
  std::vector<std::string> written;
  auto put = [&](const std::string& suffix, const std::string& svg) {
    write_file_atomic(o.prefix + suffix, svg);
    written.push_back(o.prefix + suffix);
  };
  if (t.drive_mb_s.empty()) {
    if (notes)
      notes->push_back(cat(o.trace, ": no drive_bins lines (the run stopped before closing its trace?): no drives picture"));
  } else {
    put("-drives.svg", drives_chart(t).svg());
  }
  put("-reads.svg", reads_chart(t, o.reads_by).svg());
  if (!o.stats.empty()) {
    put("-steps.svg", steps_chart(steps).svg());
    put("-hits.svg", hits_chart(steps).svg());
  }
  return written;
}

}  // namespace deltafin
