#include "io/monitor.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace deltafin {

namespace {
constexpr size_t kTraceBufferBytes = 1 << 20;

std::string record_json(const ReadRecord& r) {
  nlohmann::ordered_json j;
  j["t"] = r.cache_hit ? "hit" : "read";
  j["layer"] = r.layer;
  j["expert"] = r.expert;
  j["drive"] = r.drive;
  j["drives"] = r.drives;
  j["prefetch"] = r.prefetch;
  j["promoted"] = r.promoted;
  j["ok"] = r.ok;
  j["cancelled"] = r.cancelled;
  j["enqueue_s"] = r.enqueue_s;
  j["start_s"] = r.start_s;
  j["end_s"] = r.end_s;
  j["bytes"] = r.bytes;
  if (!r.error.empty()) j["error"] = r.error;  // a failed read, or what failed before an ok one
  // Paths in errors need not be UTF-8: replace what is not, never throw.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}
}  // namespace

Monitor::Monitor(size_t drives, double bin_seconds)
    : t0_(std::chrono::steady_clock::now()),
      bin_s_(bin_seconds > 0 ? bin_seconds : 0.010),
      counters_(drives),
      bins_(drives),
      busy_since_(drives, -1.0) {}

Monitor::~Monitor() {
  try {
    close_trace();
  } catch (const std::exception&) {
    // A destructor cannot report it; close_trace() called explicitly does.
  }
}

double Monitor::now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

void Monitor::open_trace(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) fail(path, ": cannot open the trace file: ", std::strerror(errno));
  std::FILE* old = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (trace_) {
      flush_trace();
      old = trace_;
    }
    trace_ = f;
    trace_path_ = path;
    trace_failed_ = false;
    trace_buf_.clear();
    trace_buf_.reserve(kTraceBufferBytes + 4096);
  }
  if (old) std::fclose(old);
}

void Monitor::close_trace() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!trace_) return;
  // The 10 ms bins close the trace: one line per drive with the bytes it
  // completed in each bin since the monitor started.
  for (size_t d = 0; d < bins_.size(); ++d) {
    nlohmann::json j;
    j["t"] = "drive_bins";
    j["drive"] = d;
    j["bin_s"] = bin_s_;
    j["bytes"] = bins_[d];
    trace_line(j.dump());
  }
  flush_trace();
  bool failed = trace_failed_ || std::fclose(trace_) != 0;
  trace_ = nullptr;
  trace_buf_.clear();
  trace_buf_.shrink_to_fit();
  if (failed) fail(trace_path_, ": writing the trace failed");
}

void Monitor::flush_trace() {
  if (!trace_ || trace_buf_.empty()) return;
  if (std::fwrite(trace_buf_.data(), 1, trace_buf_.size(), trace_) != trace_buf_.size()) trace_failed_ = true;
  if (std::fflush(trace_) != 0) trace_failed_ = true;
  trace_buf_.clear();
}

void Monitor::trace_line(const std::string& line) {
  if (!trace_) return;
  trace_buf_ += line;
  trace_buf_ += '\n';
  if (trace_buf_.size() >= kTraceBufferBytes) flush_trace();
}

void Monitor::chunk_done(int drive, double end_s, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (drive < 0 || static_cast<size_t>(drive) >= counters_.size()) return;
  counters_[drive].bytes += bytes;
  ++counters_[drive].reads;
  const size_t bin = static_cast<size_t>(std::max(0.0, end_s) / bin_s_);
  auto& bins = bins_[drive];
  if (bins.size() <= bin) bins.resize(bin + 1, 0);
  bins[bin] += bytes;
}

void Monitor::drive_busy(int drive, double t, bool busy) {
  std::lock_guard<std::mutex> lock(mu_);
  if (drive < 0 || static_cast<size_t>(drive) >= counters_.size()) return;
  double& since = busy_since_[drive];
  if (busy) {
    if (since < 0) since = t;
  } else if (since >= 0) {
    counters_[drive].busy_s += t - since;
    since = -1;
  }
}

void Monitor::read_done(const ReadRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  if (trace_) trace_line(record_json(record));
}

void Monitor::cache_hit(int64_t layer, int64_t expert) {
  ReadRecord r;
  r.layer = layer;
  r.expert = expert;
  r.cache_hit = true;
  r.enqueue_s = r.start_s = r.end_s = now();
  std::lock_guard<std::mutex> lock(mu_);
  if (trace_) trace_line(record_json(r));
}

std::vector<DriveCounters> Monitor::drive_counters() const {
  const double t = now();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DriveCounters> out = counters_;
  for (size_t d = 0; d < out.size(); ++d)
    if (busy_since_[d] >= 0) out[d].busy_s += t - busy_since_[d];
  return out;
}

std::vector<std::vector<uint64_t>> Monitor::drive_bins() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bins_;
}

}  // namespace deltafin
