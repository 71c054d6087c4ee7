#include "engine/stats_collector.h"


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

PrefillTotals RunStatsCollector::prefill_totals() const {
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

std::optional<MirrorTotals> RunStatsCollector::mirror_totals() const {
  if (!m_.stream || !m_.stream->fetcher()) return std::nullopt;
  const FetchCounters f = m_.stream->counters().fetch;
  MirrorTotals t;
  t.fetched = f.fetched, t.bytes = f.bytes, t.failed = f.failed, t.refused = f.refused, t.retries = f.retries;
  t.evicted = f.evicted, t.evicted_bytes = f.evicted_bytes, t.not_kept = f.not_kept, t.install_failed = f.install_failed;
  t.last_install_error = f.last_install_error;
  t.seconds = f.seconds;
  return t;
}

}  // namespace deltafin
