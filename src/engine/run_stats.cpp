#include "engine/run_stats.h"

#include "util/error.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "util/progress.h"

namespace deltafin {

RunStatsCollector::Snapshot RunStatsCollector::take() const {
  Snapshot s;
  s.t = std::chrono::steady_clock::now();
  if (m_.stream) s.stream = m_.stream->counters();
  if (m_.route_lookahead()) s.look = m_.route_lookahead()->counters();
  if (m_.monitor) s.drives = m_.monitor->drive_counters();
  return s;
}

void RunStatsCollector::step_begin(bool) { begin_ = take(); }

void RunStatsCollector::step_end(bool prefill) {
  const Snapshot e = take();
  const Snapshot& b = begin_;
  StepStats s;
  s.prefill = prefill;
  const double sec = std::chrono::duration<double>(e.t - b.t).count();
  s.ms = sec * 1e3;
  s.wait_ms = (e.stream.wait_s - b.stream.wait_s) * 1e3;
  s.bytes_read = e.stream.bytes_read - b.stream.bytes_read;
  s.demanded = e.stream.demanded - b.stream.demanded;
  s.hits = e.stream.hits - b.stream.hits;
  s.prefetch_hits = e.stream.prefetch_hits - b.stream.prefetch_hits;
  s.inflight = e.stream.inflight - b.stream.inflight;
  s.misses = e.stream.misses - b.stream.misses;
  s.prefetch_issued = e.stream.prefetch_issued - b.stream.prefetch_issued;
  s.prefetch_cancelled = e.stream.prefetch_cancelled - b.stream.prefetch_cancelled;
  s.prefetch_gated = e.stream.prefetch_gated - b.stream.prefetch_gated;
  s.fetched = e.stream.fetch.fetched - b.stream.fetch.fetched;
  s.fetch_bytes = e.stream.fetch.bytes - b.stream.fetch.bytes;
  s.fetch_s = e.stream.fetch.seconds - b.stream.fetch.seconds;
  s.pilot_hits = e.look.pilot_hits - b.look.pilot_hits;
  s.pilot_actual = e.look.actual - b.look.actual;
  for (size_t l = 0; l < e.stream.layer_expert_s.size(); ++l) {
    auto before = [](const std::vector<double>& v, size_t i) { return i < v.size() ? v[i] : 0.0; };
    s.layer_expert_ms.push_back((e.stream.layer_expert_s[l] - before(b.stream.layer_expert_s, l)) * 1e3);
    s.layer_wait_ms.push_back((e.stream.layer_wait_s[l] - before(b.stream.layer_wait_s, l)) * 1e3);
  }
  for (size_t d = 0; d < e.drives.size(); ++d)
    s.drive_mb_s.push_back(sec > 0 ? (e.drives[d].bytes - b.drives[d].bytes) / sec / 1e6 : 0.0);
  const auto& routes = m_.causal().last_routes();
  const int64_t E = m_.summary().experts;
  for (size_t l = 0; l < routes.size(); ++l) {
    if (!routes[l].empty()) s.positions = routes[l].size();
    if (!prefill) continue;
    for (const Route& r : routes[l])
      for (int64_t e : r.experts)
        if (prefill_pairs_.insert(static_cast<int64_t>(l) * E + e).second) ++s.unique_new;
  }
  steps_.push_back(s);
}

std::string RunStatsCollector::format_step(size_t index, const StepStats& s) {
  char buf[256];
  std::string out;
  std::snprintf(buf, sizeof buf, "%s %zu: %.1f ms (waiting %.1f), read %s, experts %llu: %llu hits (%llu prefetched), %llu in flight, %llu misses",
                s.prefill ? "prefill" : "token", index, s.ms, s.wait_ms, human_bytes(static_cast<double>(s.bytes_read)).c_str(),
                static_cast<unsigned long long>(s.demanded), static_cast<unsigned long long>(s.hits),
                static_cast<unsigned long long>(s.prefetch_hits), static_cast<unsigned long long>(s.inflight),
                static_cast<unsigned long long>(s.misses));
  out = buf;
  if (s.pilot_actual) {
    std::snprintf(buf, sizeof buf, ", lookahead recall %.2f", static_cast<double>(s.pilot_hits) / s.pilot_actual);
    out += buf;
  }
  if (!s.drive_mb_s.empty()) {
    out += ", drives MB/s";
    for (double v : s.drive_mb_s) std::snprintf(buf, sizeof buf, " %.0f", v), out += buf;
  }
  if (s.fetched) {
    std::snprintf(buf, sizeof buf, ", fetched %llu (%s, %.1f s)", static_cast<unsigned long long>(s.fetched),
                  human_bytes(static_cast<double>(s.fetch_bytes)).c_str(), s.fetch_s);
    out += buf;
  }
  return out;
}

RunStatsCollector::PrefillTotals RunStatsCollector::prefill_totals() const {
  PrefillTotals p;
  for (const StepStats& s : steps_) {
    if (!s.prefill) continue;
    ++p.passes;
    p.positions += s.positions;
    p.unique_pairs += s.unique_new;
    p.bytes_read += s.bytes_read;
    p.ms += s.ms;
  }
  p.unique_bytes = p.unique_pairs * (m_.manifest ? m_.manifest->expert_bytes : 0);
  return p;
}

std::string RunStatsCollector::summary() const {
  StepStats t;
  size_t n = 0;
  for (const StepStats& s : steps_) {
    if (s.prefill) continue;
    ++n;
    t.ms += s.ms, t.wait_ms += s.wait_ms, t.bytes_read += s.bytes_read, t.demanded += s.demanded, t.hits += s.hits;
    t.prefetch_hits += s.prefetch_hits, t.inflight += s.inflight, t.misses += s.misses;
    t.pilot_hits += s.pilot_hits, t.pilot_actual += s.pilot_actual;
    t.prefetch_issued += s.prefetch_issued, t.prefetch_cancelled += s.prefetch_cancelled, t.prefetch_gated += s.prefetch_gated;
    t.drive_mb_s.resize(s.drive_mb_s.size());
    for (size_t d = 0; d < s.drive_mb_s.size(); ++d) t.drive_mb_s[d] += s.drive_mb_s[d] * s.ms;  // time-weighted
  }
  char buf[512];
  std::string out;
  const PrefillTotals p = prefill_totals();
  if (p.passes > 0) {
    std::snprintf(buf, sizeof buf,
                  "prefill: %llu positions in %llu passes, %.1f ms (%.1f tokens/s), read %s for %llu unique experts (%s): "
                  "amplification %.2f\n",
                  static_cast<unsigned long long>(p.positions), static_cast<unsigned long long>(p.passes), p.ms,
                  p.ms > 0 ? p.positions / (p.ms / 1e3) : 0.0, human_bytes(static_cast<double>(p.bytes_read)).c_str(),
                  static_cast<unsigned long long>(p.unique_pairs), human_bytes(static_cast<double>(p.unique_bytes)).c_str(),
                  p.amplification());
    out += buf;
  }
  if (n > 0) {
    std::snprintf(buf, sizeof buf,
                  "decode: %zu steps, %.1f ms/token (%.1f waiting on reads), %s read/token, hit rate %.3f "
                  "(%llu hits incl. %llu prefetched, %llu in flight, %llu misses of %llu)",
                  n, t.ms / n, t.wait_ms / n, human_bytes(static_cast<double>(t.bytes_read) / n).c_str(),
                  t.demanded ? static_cast<double>(t.hits) / t.demanded : 0.0, static_cast<unsigned long long>(t.hits),
                  static_cast<unsigned long long>(t.prefetch_hits), static_cast<unsigned long long>(t.inflight),
                  static_cast<unsigned long long>(t.misses), static_cast<unsigned long long>(t.demanded));
    out += buf;
    if (t.pilot_actual) {
      std::snprintf(buf, sizeof buf, "; lookahead recall %.3f", static_cast<double>(t.pilot_hits) / t.pilot_actual);
      out += buf;
    }
    if (t.prefetch_issued || t.prefetch_gated) {
      std::snprintf(buf, sizeof buf, "; prefetches %llu read (%llu cancelled), %llu held back by the idle-window gate",
                    static_cast<unsigned long long>(t.prefetch_issued), static_cast<unsigned long long>(t.prefetch_cancelled),
                    static_cast<unsigned long long>(t.prefetch_gated));
      out += buf;
    }
    if (!t.drive_mb_s.empty() && t.ms > 0) {
      out += "; drives MB/s";
      for (double v : t.drive_mb_s) std::snprintf(buf, sizeof buf, " %.0f", v / t.ms), out += buf;
    }
    out += "\n";
  }
  if (m_.stream && m_.stream->fetcher()) {
    const FetchCounters f = m_.stream->counters().fetch;
    std::snprintf(buf, sizeof buf,
                  "mirror: %llu experts fetched, %s received, %.1f s of fetch time (%.1f MB/s per fetch), %llu retries, "
                  "%llu refused copies, %llu failed, %llu evicted (%s), %llu not kept\n",
                  static_cast<unsigned long long>(f.fetched), human_bytes(static_cast<double>(f.bytes)).c_str(), f.seconds,
                  f.seconds > 0 ? f.bytes / f.seconds / 1e6 : 0.0, static_cast<unsigned long long>(f.retries),
                  static_cast<unsigned long long>(f.refused), static_cast<unsigned long long>(f.failed),
                  static_cast<unsigned long long>(f.evicted), human_bytes(static_cast<double>(f.evicted_bytes)).c_str(),
                  static_cast<unsigned long long>(f.not_kept));
    out += buf;
    if (f.install_failed)
      out += cat("mirror: ", f.install_failed, " fetched experts could not be written to their drives (used from RAM); last: ",
                 f.last_install_error, "\n");
  }
  std::snprintf(buf, sizeof buf, "peak RSS %s (plan: %s spine + %s cache + %s pinned)\n",
                human_bytes(static_cast<double>(peak_rss_bytes())).c_str(),
                human_bytes(static_cast<double>(m_.memory.spine_bytes)).c_str(),
                human_bytes(static_cast<double>(m_.memory.cache_bytes())).c_str(),
                human_bytes(static_cast<double>(m_.memory.pinned_bytes())).c_str());
  out += buf;
  return out;
}

std::string RunStatsCollector::to_json() const {
  nlohmann::ordered_json j;
  j["config"] = m_.describe();
  j["spine_bytes"] = m_.memory.spine_bytes;
  j["cache_bytes"] = m_.memory.cache_bytes();
  j["pinned_bytes"] = m_.memory.pinned_bytes();
  j["expert_bytes"] = m_.manifest ? m_.manifest->expert_bytes : 0;
  j["peak_rss_bytes"] = peak_rss_bytes();
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const StepStats& s : steps_) {
    steps.push_back({{"prefill", s.prefill}, {"positions", s.positions}, {"unique_new", s.unique_new}, {"ms", s.ms}, {"wait_ms", s.wait_ms}, {"bytes_read", s.bytes_read}, {"fetched", s.fetched}, {"fetch_bytes", s.fetch_bytes}, {"fetch_s", s.fetch_s},
                     {"demanded", s.demanded}, {"hits", s.hits}, {"prefetch_hits", s.prefetch_hits},
                     {"inflight", s.inflight}, {"misses", s.misses}, {"prefetch_issued", s.prefetch_issued},
                     {"prefetch_cancelled", s.prefetch_cancelled}, {"prefetch_gated", s.prefetch_gated},
                     {"pilot_hits", s.pilot_hits},
                     {"pilot_actual", s.pilot_actual}, {"drive_mb_s", s.drive_mb_s}});
  }
  j["steps"] = steps;
  const PrefillTotals p = prefill_totals();
  j["prefill"] = {{"ttft_ms", ttft_ms}, {"positions", p.positions}, {"passes", p.passes}, {"ms", p.ms}, {"unique_pairs", p.unique_pairs},
                  {"unique_bytes", p.unique_bytes}, {"bytes_read", p.bytes_read}, {"amplification", p.amplification()}};
  return j.dump(1) + "\n";
}

}  // namespace deltafin
