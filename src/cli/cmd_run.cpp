// deltafin run: generate text from a prompt, streaming it as it is made.
#include <algorithm>
#include <numeric>
#include <atomic>
#include <optional>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/token_list.h"
#include "engine/generate.h"
#include "engine/prompt_disk_cache.h"
#include "cli/model_options.h"
#include "engine/run_stats.h"
#include "model/loaders/drafter_factory.h"
#include "speculative/speculative_generate.h"
#include "tokenizer/stream_decoder.h"
#include "util/error.h"
#include "util/file.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

struct RunArgs {
  ModelArgs model;
  std::string prompt, prompt_ids, effort = "max", stats_json, tokens_out;
  std::string draft = "none";
  int draft_k = 0;
  bool chat = false, no_thinking = false, stats = false, ignore_eos = false;
  int64_t max_new = 128;
  int64_t prefill_chunk = kDefaultPrefillChunk;
  int64_t prefill_group = 0;
  PromptCacheArgs prompt_cache;
};

std::vector<uint32_t> encode_prompt(LoadedModel& m, const RunArgs& a) {
  if (a.prompt.empty() && a.prompt_ids.empty()) fail("give --prompt TEXT or --prompt-ids 1,2,3");
  if (!a.prompt_ids.empty() && a.chat) fail("--prompt-ids is a raw prompt: it cannot be combined with --chat");
  if (!a.prompt_ids.empty()) return parse_token_list(a.prompt_ids, "--prompt-ids");
  if (!a.chat) return m.text->encode_ordinary(a.prompt);  // raw mode: no BOS, ever (§7.8)
  const ChatFormat* chat = m.chat();
  if (!chat) fail("--chat: ", m.chat_missing());
  ChatTurnOptions o;
  o.thinking = !a.no_thinking;
  o.reasoning_effort = a.effort;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", a.prompt}}});
  return chat->render(messages, o).tokens;
}

void print_stats(const GenerateStats& st, double load_s) {
  std::fprintf(stderr, "\n-- stats --\n");
  std::fprintf(stderr, "load %.2f s; prompt %lld tokens; prefill %.1f ms (%.1f tokens/s); time to first token %.1f ms\n",
               load_s, static_cast<long long>(st.prompt_tokens), st.prefill_seconds * 1e3,
               st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0, st.ttft_seconds * 1e3);
  double total = 0;
  std::fprintf(stderr, "per-token ms:");
  for (double ms : st.token_ms) std::fprintf(stderr, " %.2f", ms), total += ms;
  std::fprintf(stderr, "\n");
  if (!st.token_ms.empty())
    std::fprintf(stderr, "decode %zu tokens in %.1f ms (%.2f tokens/s)\n", st.token_ms.size(), total,
                 1e3 * st.token_ms.size() / total);
  std::fprintf(stderr, "generated %lld tokens; stopped: %s\n", static_cast<long long>(st.new_tokens),
               stop_reason_name(st.reason));
}

// How speculation went: rounds, acceptance, tokens per step, the k used; the
// rounds' tokens per second against the plain steps' of the same run when
// both happened (the controller's own comparison); and, streaming, expert
// bytes read per emitted token.
std::string describe_spec(const std::string& name, const SpecStats& s, const GenerateStats& st,
                          const RunStatsCollector& collector, bool streamed) {
  std::string ks;
  for (size_t k = 1; k < s.rounds_by_k.size(); ++k)
    if (s.rounds_by_k[k]) ks += " k" + std::to_string(k) + ":" + std::to_string(s.rounds_by_k[k]);
  const long long decode_tokens = st.new_tokens > 0 ? st.new_tokens - 1 : 0;
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "speculation (%s): %lld verification rounds + %lld plain steps for %lld decode tokens (%.2f tokens/step); "
                "drafted %lld, accepted %lld (%.1f%%); drafting %.1f ms, rounds %.1f ms, plain %.1f ms; rounds by k:%s",
                name.c_str(), static_cast<long long>(s.rounds), static_cast<long long>(s.plain_steps), decode_tokens,
                s.tokens_per_step(), static_cast<long long>(s.drafted), static_cast<long long>(s.accepted),
                100.0 * s.acceptance(), s.draft_seconds * 1e3, s.round_seconds * 1e3, s.plain_seconds * 1e3,
                ks.empty() ? " none" : ks.c_str());
  std::string out = buf;
  if (s.rounds > 0 && s.plain_steps > 0 && s.round_seconds > 0 && s.plain_seconds > 0) {
    std::snprintf(buf, sizeof buf, "; rounds emitted %.2fx the plain steps' tokens per second",
                  (s.round_tokens / s.round_seconds) / (s.plain_steps / s.plain_seconds));
    out += buf;
  }
  if (streamed && decode_tokens > 0) {
    uint64_t bytes = 0;
    for (const StepStats& step : collector.steps())
      if (!step.prefill) bytes += step.bytes_read;
    out += "; expert bytes read per emitted token " + human_bytes(static_cast<double>(bytes) / decode_tokens);
  }
  return out;
}

nlohmann::ordered_json spec_json(const std::string& name, const SpecStats& s) {
  return {{"drafter", name},          {"rounds", s.rounds},           {"plain_steps", s.plain_steps},
          {"drafted", s.drafted},     {"accepted", s.accepted},       {"round_tokens", s.round_tokens},
          {"draft_s", s.draft_seconds}, {"round_s", s.round_seconds}, {"plain_s", s.plain_seconds},
          {"rounds_by_k", s.rounds_by_k}};
}

int run(const RunArgs& a) {
  if (a.prompt.empty() && a.prompt_ids.empty()) fail("give --prompt TEXT or --prompt-ids 1,2,3");
  auto m = load_model(a.model);
  if (a.stats || m->spine_format != "bf16") std::fprintf(stderr, "%s\n", m->describe().c_str());
  if (m->stream) std::fprintf(stderr, "%s\n", m->memory.describe().c_str());
  if (m->stream && !m->stream->reader().engine_note().empty())
    std::fprintf(stderr, "note: %s\n", m->stream->reader().engine_note().c_str());
  CausalModel& model = m->causal();
  std::vector<uint32_t> prompt = encode_prompt(*m, a);
  check_token_ids(prompt, model.summary().vocab, "--prompt-ids");
  std::unique_ptr<ModelSession> session_ptr = model.new_session();
  GenerateParams p;
  p.max_new = a.max_new;
  // A chat ends at its end-of-turn token, raw text at the model's end token.
  p.eos = a.chat ? m->chat()->end_tokens() : m->eos;  // none named: the run goes to the budget
  p.ignore_eos = a.ignore_eos;
  p.prefill_chunk = a.prefill_chunk;
  p.prefill_group = a.prefill_group;
  p.stop = &g_interrupted;
  RunStatsCollector collector(*m);
  if (m->stream || !a.stats_json.empty()) p.observer = &collector;
  DrafterFactory drafters(a.draft, *m);
  std::unique_ptr<Drafter> drafter = drafters.make(prompt, a.chat);
  SpecParams sp;
  sp.drafter = drafter.get();
  sp.fixed_k = a.draft_k;
  SpecStats spec_stats;
  std::vector<uint32_t> emitted;
  g_interrupted.store(false);
  std::signal(SIGINT, on_sigint);

  // Prompt states on disk (engine/prompt_disk_cache.h): restore the longest
  // kept prefix, keep the state at the prompt's last whole block.
  std::unique_ptr<PromptDiskCache> disk;
  const std::string cache_dir = a.prompt_cache.dir_for(a.model);
  std::shared_ptr<SessionMark> kept;
  if (!cache_dir.empty()) {
    disk = std::make_unique<PromptDiskCache>(cache_dir, a.prompt_cache.budget_bytes(), m->fingerprint, model);
    if (PromptDiskCache::Restored r = disk->restore(prompt, 0); r.session) {
      session_ptr = std::move(r.session);
      p.prompt_done = r.length;
    }
    p.pause_at = {PromptDiskCache::save_point(static_cast<int64_t>(prompt.size()))};
    p.at_pause = [&](const ModelSession& s) { kept = model.mark(s); };
    if (a.stats && p.prompt_done > 0)
      std::fprintf(stderr, "prompt cache: %lld of %zu prompt tokens restored from %s\n",
                   static_cast<long long>(p.prompt_done), prompt.size(), cache_dir.c_str());
  }
  ModelSession& session = *session_ptr;

  StreamDecoder decoder(*m->text);
  GenerateStats st = generate_speculative(model, session, prompt, p, sp, &spec_stats, [&](uint32_t id) {
    emitted.push_back(id);
    if (p.ends_turn(id)) return;  // the stop token is not text
    std::string text = decoder.push(id);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  std::string rest = decoder.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::printf("\n");
  std::fflush(stdout);
  if (disk && kept) disk->save(std::span(prompt).first(static_cast<size_t>(kept->length)), *kept, session);
  std::signal(SIGINT, SIG_DFL);
  m->save_heat();
  if (a.stats) print_stats(st, m->load_seconds);
  if (a.stats)
    std::fprintf(stderr, "session: %s for %lld positions (%s fixed + %llu B per position)\n",
                 human_bytes(static_cast<double>(session.bytes())).c_str(), static_cast<long long>(session.length()),
                 human_bytes(static_cast<double>(model.summary().session_fixed_bytes)).c_str(),
                 static_cast<unsigned long long>(model.summary().session_bytes_per_position));
  if (a.stats && drafter) std::fprintf(stderr, "%s\n", describe_spec(drafter->name(), spec_stats, st, collector, m->stream != nullptr).c_str());
  if (a.stats && m->stream) {
    for (size_t i = 0; i < collector.steps().size(); ++i)
      std::fprintf(stderr, "%s\n", RunStatsCollector::format_step(i, collector.steps()[i]).c_str());
    std::fprintf(stderr, "%s", collector.summary().c_str());
    if (m->route_lookahead())
      std::fprintf(stderr, "lookahead per layer (recall EMA, samples):\n%s", m->route_lookahead()->describe_gates().c_str());
  }
  collector.ttft_ms = st.ttft_seconds * 1e3;
  if (!a.stats_json.empty()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(collector.to_json());
    j["generated_tokens"] = st.new_tokens;
    j["decode_ms"] = std::accumulate(st.token_ms.begin(), st.token_ms.end(), 0.0);
    j["spec"] = spec_json(drafter ? drafter->name() : "none", spec_stats);
    write_file_atomic(a.stats_json, j.dump(1) + "\n");
  }
  if (!a.tokens_out.empty()) {
    std::string ids;
    for (uint32_t id : emitted) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    write_file_atomic(a.tokens_out, ids + "\n");
  }
  if (st.reason == StopReason::Interrupted) {
    std::fprintf(stderr, "[interrupted after %lld tokens]\n", static_cast<long long>(st.new_tokens));
    return 130;
  }
  return 0;
}
}  // namespace

Command add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand("run", "Generate text (greedy) from a prompt");
  add_model_options(sub, a->model);
  auto* text = sub->add_option("--prompt", a->prompt, "The prompt (raw text, or the user message with --chat)");
  auto* ids = sub->add_option("--prompt-ids", a->prompt_ids, "The prompt as comma-separated token ids (raw, for benchmarks)");
  text->excludes(ids);
  sub->add_flag("--chat", a->chat, "Render the prompt as a user message with the model family's chat template");
  sub->add_option("--reasoning-effort", a->effort, "Chat: thinking effort")
      ->check(CLI::IsMember({"low", "high", "max"}))
      ->capture_default_str();
  sub->add_flag("--no-thinking", a->no_thinking, "Chat: answer without a thinking block");
  sub->add_option("--max-new", a->max_new, "Most tokens to generate")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--prefill-chunk", a->prefill_chunk,
                  "Prompt rows per slice of a layer (layer-major prefill: a cache holding a layer's union reads each "
                  "expert once; 0 = whole group)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--prefill-group", a->prefill_group,
                  "Prompt positions per layer-major pass (0 = as many as 1 GiB of activations holds)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past <|end_of_msg|> (fixed-length benchmarks)");
  add_prompt_cache_options(sub, a->prompt_cache);
  sub->add_flag("--stats", a->stats, "Print per-token times and prefill/decode tokens/s");
  sub->add_option("--stats-json", a->stats_json, "Write every step's figures (and speculation's) as JSON to this file");
  sub->add_option("--tokens-out", a->tokens_out, "Write the generated token ids (comma-separated) to this file");
  sub->add_option("--draft", a->draft,
                  "Speculative decoding (never changes the output): none, ngram (prompt lookup), dspark:DIR (K3's DSpark "
                  "checkpoint), model:DIR (a small Qwen3 checkpoint with tokenizer.json), replay:FILE (oracle: a previous "
                  "run's --tokens-out)")
      ->capture_default_str();
  sub->add_option("--draft-k", a->draft_k, "Tokens drafted per step, 1-7; 0 = adapt to what pays")
      ->check(CLI::Range(0, 7))
      ->capture_default_str();
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
