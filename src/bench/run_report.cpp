#include "bench/run_report.h"

#include <cstdio>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/progress.h"
#include "util/strformat.h"

namespace deltafin {

namespace {

std::string describe_memory_plan(const MemoryPlan& p) {
  std::ostringstream o;
  o << "memory: spine " << human_bytes(p.spine_bytes) << " + expert cache " << human_bytes(p.cache_bytes()) << " ("
    << p.cache_slots << " slots of " << human_bytes(p.slot_bytes) << (p.cache_auto ? ", auto" : "") << ", at least "
    << p.working_slots << " for one layer's reads and prefetch)";
  if (p.pinned_slots) o << " + pinned " << human_bytes(p.pinned_bytes()) << " (" << p.pinned_slots << " hottest experts)";
  o << " = " << human_bytes(p.spine_bytes + p.cache_bytes() + p.pinned_bytes()) << "; expert bank "
    << human_bytes(p.expert_bank_bytes) << "; RAM available " << human_bytes(p.ram_available);
  return o.str();
}

std::string generate_lines(const GenerateStats& st, double load_s) {
  std::string out = "\n-- stats --\n";
  out += strformat("load %.2f s; prompt %lld tokens; prefill %.1f ms (%.1f tokens/s); time to first token %.1f ms\n",
                   load_s, static_cast<long long>(st.prompt_tokens), st.prefill_seconds * 1e3,
                   st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0, st.ttft_seconds * 1e3);
  double total = 0;
  out += "per-token ms:";
  for (double ms : st.token_ms) out += strformat(" %.2f", ms), total += ms;
  out += "\n";
  if (!st.token_ms.empty())
    out += strformat("decode %zu tokens in %.1f ms (%.2f tokens/s)\n", st.token_ms.size(), total,
                     1e3 * st.token_ms.size() / total);
  out += strformat("generated %lld tokens; stopped: %s\n", static_cast<long long>(st.new_tokens),
                   stop_reason_name(st.reason));
  return out;
}

// How speculation went: rounds, acceptance, tokens per step, the k used; the
// rounds' tokens per second against the plain steps' of the same run when
// both happened (the controller's own comparison); and, streaming, expert
// bytes read per emitted token.
std::string speculation_line(const RunStats& r) {
  const SpecStats& s = r.spec;
  const GenerateStats& st = r.generate;
  std::string ks;
  for (size_t k = 1; k < s.rounds_by_k.size(); ++k)
    if (s.rounds_by_k[k]) ks += " k" + std::to_string(k) + ":" + std::to_string(s.rounds_by_k[k]);
  const long long decode_tokens = st.new_tokens > 0 ? st.new_tokens - 1 : 0;
  std::string out = strformat(
      "speculation (%s): %lld verification rounds + %lld plain steps for %lld decode tokens (%.2f tokens/step); "
      "drafted %lld, accepted %lld (%.1f%%); drafting %.1f ms, rounds %.1f ms, plain %.1f ms; rounds by k:%s",
      r.drafter.c_str(), static_cast<long long>(s.rounds), static_cast<long long>(s.plain_steps), decode_tokens,
      s.tokens_per_step(), static_cast<long long>(s.drafted), static_cast<long long>(s.accepted), 100.0 * s.acceptance(),
      s.draft_seconds * 1e3, s.round_seconds * 1e3, s.plain_seconds * 1e3, ks.empty() ? " none" : ks.c_str());
  if (s.rounds > 0 && s.plain_steps > 0 && s.round_seconds > 0 && s.plain_seconds > 0)
    out += strformat("; rounds emitted %.2fx the plain steps' tokens per second",
                     (s.round_tokens / s.round_seconds) / (s.plain_steps / s.plain_seconds));
  if (r.model.stream && decode_tokens > 0) {
    uint64_t bytes = 0;
    for (const StepStats& step : r.steps)
      if (!step.prefill) bytes += step.bytes_read;
    out += "; expert bytes read per emitted token " + human_bytes(static_cast<double>(bytes) / decode_tokens);
  }
  return out;
}

// Totals over the decode steps (and the prefill separately), the mirror's
// fetches and peak RSS against the memory plan.
std::string stream_summary(const RunStats& r) {
  StepStats t;
  size_t n = 0;
  for (const StepStats& s : r.steps) {
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
  const PrefillTotals& p = r.prefill;
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
  if (r.mirror) {
    const MirrorTotals& f = *r.mirror;
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
  const MemoryPlan& m = r.model.memory;
  std::snprintf(buf, sizeof buf, "peak RSS %s (plan: %s spine + %s cache + %s pinned)\n",
                human_bytes(static_cast<double>(r.peak_rss_bytes)).c_str(),
                human_bytes(static_cast<double>(m.spine_bytes)).c_str(),
                human_bytes(static_cast<double>(m.cache_bytes())).c_str(),
                human_bytes(static_cast<double>(m.pinned_bytes())).c_str());
  out += buf;
  return out;
}

}  // namespace

std::string describe_model(const ModelInfo& m) {
  std::ostringstream o;
  o << m.family << "; spine " << m.spine_format;
  if (!m.weight_exact()) o << " (NOT weight-exact: int8-row spine)";
  if (!m.stream) {
    o << "; experts resident";
  } else {
    const StreamInfo& s = *m.stream;
    o << "; experts streamed from " << s.drives << " drive(s), cache "
      << human_bytes(static_cast<double>(m.memory.cache_bytes())) << ", lookahead " << lookahead_mode_name(s.lookahead)
      << ", io " << s.io_engine;
    // cycle-heat, auto's choice on a new store, is not named (the lines stay as before issue 35).
    if (s.cache_policy != "cycle-heat")
      o << ", cache policy " << s.cache_policy << (s.cache_policy_why.empty() ? "" : " (" + s.cache_policy_why + ")");
    if (s.mirror) {
      o << "; missing experts fetched from " << s.mirror->url << " (" << s.mirror->local_experts << " on the drives";
      if (s.mirror->disk_budget_bytes)
        o << ", disk budget " << human_bytes(static_cast<double>(s.mirror->disk_budget_bytes));
      o << ")";
    }
  }
  if (!m.compute.empty()) o << "; computed by " << m.compute;
  return o.str();
}

std::string load_report(const ModelInfo& m) {
  if (!m.stream) return "";
  std::string out = describe_memory_plan(m.memory) + "\n";
  if (!m.stream->io_note.empty()) out += "note: " + m.stream->io_note + "\n";
  return out;
}

std::string session_report(const SessionInfo& s) {
  const char* why = s.limit_by == SessionInfo::LimitBy::Option   ? "--context"
                    : s.limit_by == SessionInfo::LimitBy::Budget ? "what the budget holds"
                                                                 : "the model's own limit";
  return strformat("session: budget %.1f MB, %llu B per position + %.1f MB fixed; context limit %lld positions (%s)\n",
                   static_cast<double>(s.budget_bytes) / 1e6, static_cast<unsigned long long>(s.bytes_per_position),
                   static_cast<double>(s.fixed_bytes) / 1e6, static_cast<long long>(s.context_limit), why);
}

std::string format_step(size_t index, const StepStats& s) {
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

std::string run_stats_text(const RunStats& r) {
  std::string out = generate_lines(r.generate, r.model.load_seconds);
  out += strformat("session: %s for %lld positions (%s fixed + %llu B per position)\n",
                   human_bytes(static_cast<double>(r.session_bytes)).c_str(), static_cast<long long>(r.session_length),
                   human_bytes(static_cast<double>(r.session_fixed_bytes)).c_str(),
                   static_cast<unsigned long long>(r.session_bytes_per_position));
  if (r.drafter != "none") out += speculation_line(r) + "\n";
  if (!r.model.compute_stats.empty()) out += r.model.compute_stats + "\n";
  if (r.model.stream) {
    for (size_t i = 0; i < r.steps.size(); ++i) out += format_step(i, r.steps[i]) + "\n";
    out += stream_summary(r);
    if (r.lookahead_gates) out += "lookahead per layer (recall EMA, samples):\n" + *r.lookahead_gates;
  }
  return out;
}

std::string run_stats_json(const RunStats& r) {
  nlohmann::ordered_json j;
  j["config"] = describe_model(r.model);
  j["spine_bytes"] = r.model.memory.spine_bytes;
  j["cache_bytes"] = r.model.memory.cache_bytes();
  j["pinned_bytes"] = r.model.memory.pinned_bytes();
  j["expert_bytes"] = r.model.expert_bytes;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const StepStats& s : r.steps) {
    steps.push_back({{"prefill", s.prefill}, {"positions", s.positions}, {"unique_new", s.unique_new}, {"ms", s.ms},
                     {"wait_ms", s.wait_ms}, {"bytes_read", s.bytes_read}, {"fetched", s.fetched},
                     {"fetch_bytes", s.fetch_bytes}, {"fetch_s", s.fetch_s}, {"demanded", s.demanded}, {"hits", s.hits},
                     {"prefetch_hits", s.prefetch_hits}, {"inflight", s.inflight}, {"misses", s.misses},
                     {"prefetch_issued", s.prefetch_issued}, {"prefetch_cancelled", s.prefetch_cancelled},
                     {"prefetch_gated", s.prefetch_gated}, {"pilot_hits", s.pilot_hits},
                     {"pilot_actual", s.pilot_actual}, {"drive_mb_s", s.drive_mb_s}});
  }
  j["steps"] = steps;
  const PrefillTotals& p = r.prefill;
  j["prefill"] = {{"ttft_ms", r.generate.ttft_seconds * 1e3}, {"positions", p.positions}, {"passes", p.passes},
                  {"ms", p.ms}, {"unique_pairs", p.unique_pairs}, {"unique_bytes", p.unique_bytes},
                  {"bytes_read", p.bytes_read}, {"amplification", p.amplification()}};
  const SpecStats& s = r.spec;
  j["generated_tokens"] = r.generate.new_tokens;
  j["decode_ms"] = std::accumulate(r.generate.token_ms.begin(), r.generate.token_ms.end(), 0.0);
  j["spec"] = {{"drafter", r.drafter},         {"rounds", s.rounds},           {"plain_steps", s.plain_steps},
               {"drafted", s.drafted},          {"accepted", s.accepted},       {"round_tokens", s.round_tokens},
               {"draft_s", s.draft_seconds},    {"round_s", s.round_seconds},   {"plain_s", s.plain_seconds},
               {"rounds_by_k", s.rounds_by_k}};
  return j.dump(1) + "\n";
}

}  // namespace deltafin
