#include "runtime/run_report.h"

#include <numeric>

#include <nlohmann/json.hpp>

#include "util/progress.h"
#include "util/strformat.h"

namespace deltafin {

namespace {

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
std::string speculation_line(const RunReportInput& in) {
  const SpecStats& s = in.spec;
  const GenerateStats& st = in.generate;
  std::string ks;
  for (size_t k = 1; k < s.rounds_by_k.size(); ++k)
    if (s.rounds_by_k[k]) ks += " k" + std::to_string(k) + ":" + std::to_string(s.rounds_by_k[k]);
  const long long decode_tokens = st.new_tokens > 0 ? st.new_tokens - 1 : 0;
  std::string out = strformat(
      "speculation (%s): %lld verification rounds + %lld plain steps for %lld decode tokens (%.2f tokens/step); "
      "drafted %lld, accepted %lld (%.1f%%); drafting %.1f ms, rounds %.1f ms, plain %.1f ms; rounds by k:%s",
      in.drafter.c_str(), static_cast<long long>(s.rounds), static_cast<long long>(s.plain_steps), decode_tokens,
      s.tokens_per_step(), static_cast<long long>(s.drafted), static_cast<long long>(s.accepted), 100.0 * s.acceptance(),
      s.draft_seconds * 1e3, s.round_seconds * 1e3, s.plain_seconds * 1e3, ks.empty() ? " none" : ks.c_str());
  if (s.rounds > 0 && s.plain_steps > 0 && s.round_seconds > 0 && s.plain_seconds > 0)
    out += strformat("; rounds emitted %.2fx the plain steps' tokens per second",
                     (s.round_tokens / s.round_seconds) / (s.plain_steps / s.plain_seconds));
  if (in.model.stream && decode_tokens > 0) {
    uint64_t bytes = 0;
    for (const StepStats& step : in.collector.steps())
      if (!step.prefill) bytes += step.bytes_read;
    out += "; expert bytes read per emitted token " + human_bytes(static_cast<double>(bytes) / decode_tokens);
  }
  return out;
}

}  // namespace

std::string run_report_text(const RunReportInput& in) {
  const ModelSummary& c = in.model.summary();
  std::string out = generate_lines(in.generate, in.model.load_seconds);
  out += strformat("session: %s for %lld positions (%s fixed + %llu B per position)\n",
                   human_bytes(static_cast<double>(in.session_bytes)).c_str(), static_cast<long long>(in.session_length),
                   human_bytes(static_cast<double>(c.session_fixed_bytes)).c_str(),
                   static_cast<unsigned long long>(c.session_bytes_per_position));
  if (in.drafter != "none") out += speculation_line(in) + "\n";
  if (in.model.stream) {
    for (size_t i = 0; i < in.collector.steps().size(); ++i)
      out += RunStatsCollector::format_step(i, in.collector.steps()[i]) + "\n";
    out += in.collector.summary();
    if (const RouteLookaheadReport* look = in.model.route_lookahead())
      out += "lookahead per layer (recall EMA, samples):\n" + look->describe_gates();
  }
  return out;
}

std::string run_report_json(const RunReportInput& in) {
  const SpecStats& s = in.spec;
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(in.collector.to_json());
  j["generated_tokens"] = in.generate.new_tokens;
  j["decode_ms"] = std::accumulate(in.generate.token_ms.begin(), in.generate.token_ms.end(), 0.0);
  j["spec"] = {{"drafter", in.drafter},         {"rounds", s.rounds},           {"plain_steps", s.plain_steps},
               {"drafted", s.drafted},          {"accepted", s.accepted},       {"round_tokens", s.round_tokens},
               {"draft_s", s.draft_seconds},    {"round_s", s.round_seconds},   {"plain_s", s.plain_seconds},
               {"rounds_by_k", s.rounds_by_k}};
  return j.dump(1) + "\n";
}

}  // namespace deltafin
