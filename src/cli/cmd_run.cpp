// deltafin run: generate text from a prompt, streaming it as it is made.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/token_list.h"
#include "bench/run_report.h"
#include "model/loaders/drafter_factory.h"
#include "engine/engine.h"
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
  SessionArgs session;
  PromptCacheArgs prompt_cache;
};

std::vector<uint32_t> encode_prompt(const Engine& engine, const RunArgs& a) {
  if (!a.prompt_ids.empty() && a.chat) fail("--prompt-ids is a raw prompt: it cannot be combined with --chat");
  if (!a.prompt_ids.empty()) return parse_token_list(a.prompt_ids, "--prompt-ids");
  if (!a.chat) return engine.text().encode_ordinary(a.prompt);  // raw mode: no BOS, ever (§7.8)
  const ChatFormat* chat = engine.chat();
  if (!chat) fail("--chat: ", engine.chat_missing());
  ChatTurnOptions o;
  o.thinking = !a.no_thinking;
  o.reasoning_effort = a.effort;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", a.prompt}}});
  return chat->render(messages, o).tokens;
}

// One request to the engine: no prompt states kept in RAM (this process
// ends after it), states on disk where --prompt-cache-dir (or the store's
// default) says.
EngineSettings run_settings(const RunArgs& a) {
  EngineSettings so;
  so.max_tokens_ceiling = a.max_new;
  so.prompt_cache_entries = 0;
  so.prompt_cache_bytes = 0;
  so.prompt_cache_dir = a.prompt_cache.dir_for(a.model);
  so.prompt_cache_disk_bytes = so.prompt_cache_dir.empty() ? 0 : a.prompt_cache.budget_bytes();
  so.prefill_chunk = a.prefill_chunk;
  so.prefill_group = a.prefill_group;
  so.draft = parse_draft_spec(a.draft);
  so.draft_k = a.draft_k;
  a.session.apply(so);
  return so;
}

int run(const RunArgs& a) {
  if (a.prompt.empty() && a.prompt_ids.empty()) fail("give --prompt TEXT or --prompt-ids 1,2,3");
  g_interrupted.store(false);
  Engine engine(model_source(a.model), run_settings(a), &g_interrupted);
  const ModelInfo info = engine.model_info();
  if (a.stats || !info.weight_exact()) std::fprintf(stderr, "%s\n", describe_model(info).c_str());
  std::fputs(load_report(info).c_str(), stderr);
  if (a.stats) std::fputs(session_report(engine.session_info()).c_str(), stderr);
  GenerateRequest request;
  request.prompt = encode_prompt(engine, a);
  request.chat = a.chat;
  request.max_new = a.max_new;
  request.stop.ignore_end_token = a.ignore_eos;
  request.collect_stats = a.stats || !a.stats_json.empty();
  const std::vector<uint32_t>& prompt = request.prompt;
  check_token_ids(prompt, engine.vocab(), "--prompt-ids");
  std::signal(SIGINT, on_sigint);

  std::vector<uint32_t> emitted;
  StreamDecoder decoder(engine.text());
  const Outcome out = engine.generate(request, [&](uint32_t id) {
    emitted.push_back(id);
    std::string text = decoder.push(id);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  if (out.end_token) emitted.push_back(*out.end_token);  // the stop token is not text, but it was generated
  std::string rest = decoder.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::printf("\n");
  std::fflush(stdout);
  std::signal(SIGINT, SIG_DFL);
  engine.save_heat();
  if (a.stats && out.disk_tokens > 0)
    std::fprintf(stderr, "prompt cache: %lld of %zu prompt tokens restored from %s\n",
                 static_cast<long long>(out.disk_tokens), prompt.size(), a.prompt_cache.dir_for(a.model).c_str());
  if (a.stats && out.stats) std::fputs(run_stats_text(*out.stats).c_str(), stderr);
  if (!a.stats_json.empty() && out.stats) write_file_atomic(a.stats_json, run_stats_json(*out.stats));
  if (!a.tokens_out.empty()) {
    std::string ids;
    for (uint32_t id : emitted) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    write_file_atomic(a.tokens_out, ids + "\n");
  }
  if (g_interrupted.load()) {
    std::fprintf(stderr, "[interrupted after %lld tokens]\n", static_cast<long long>(emitted.size()));
    return 130;
  }
  return 0;
}
}  // namespace

Command add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand("run", "Generate text (greedy) from a prompt, printed as it is made");
  sub->footer(R"(Greedy generation, the only decoding: the target model decides every token. --model runs a Hugging
Face checkpoint with every weight in RAM; --store streams the experts from a deltafin store (setup).
No BOS is ever added. Stops at the chat format's end token (K3's <|end_of_msg|>; Qwen3's <|im_end|> or
<|endoftext|>; chat and raw), at --max-new, or when the context is full; Ctrl-C stops after the current
token and prints what was generated (exit 130).

--stats: per-token milliseconds, time to first token, prefill and decode tokens/s; with --store also, per
token, bytes read, cache hits and misses, lookahead recall and per-drive MB/s, the memory budget and
where it goes, peak RSS, the read amplification of the prompt (bytes read / bytes of the unique experts
it needed) and, for a streamed store, mirror fetch counts, bytes and time; always the session line: its
budget (--session-budget-mb, or 80% of the RAM left), bytes per position and fixed, and the context
limit with what set it (a prompt at or over it is refused, naming the limit). With --draft, --stats adds
rounds, acceptance and tokens per step.

Prefill is expert-major and layer-major: all of a pass's positions go through layer i before any goes
through layer i+1 (a pass holds as many positions as 1 GiB of activations allows, or --prefill-group),
and inside a layer attention and experts run in slices of --prefill-chunk rows. Each slice reads the
union of its experts once and applies each expert to all its rows as one batched product; the slices of
a layer come one after another, so a cache that holds one layer's union reads every needed expert once
per pass. Any chunk or group size gives bit-identical logits and state; Ctrl-C is noticed before every
layer (an unfinished pass is rolled back).

--draft turns on speculative decoding (docs/speculative.md): the output does not change by a bit.
--tokens-out writes the generated ids (the replay drafter replays such a file). Prompt states on disk
(docs/prompt-states.md): --prompt-cache-dir restores the longest prompt prefix kept there and keeps this
prompt's. Store options: the expert cache (--cache-gb, --pin-gb), route-lookahead prefetch (--lookahead
auto stops it on layers where it does not pay and reads only as many predictions as the drives can read
while they would otherwise be idle), the reader (--io, --queue-depth, --prefetch-depth, --chunk-mb,
--buffered) and --trace (every read and hit as JSON lines, for trace-plot); a streamed store also takes
--fetch-threads and --disk-budget. The heat histogram (STORE/heat.json) is updated after every run.)");
  add_model_options(sub, a->model);
  auto* text = sub->add_option("--prompt", a->prompt, "The prompt: raw text, or the user message with --chat");
  auto* ids = sub->add_option("--prompt-ids", a->prompt_ids, "The prompt as comma-separated token ids, raw (for benchmarks)");
  text->excludes(ids);
  sub->add_flag("--chat", a->chat, "Render the prompt as a user message with the model family's chat template");
  sub->add_option("--reasoning-effort", a->effort, "Chat: thinking effort")
      ->check(one_of({"low", "high", "max"}))
      ->capture_default_str();
  sub->add_flag("--no-thinking", a->no_thinking, "Chat: answer without a thinking block");
  sub->add_option("--max-new", a->max_new, "Most tokens to generate")->transform(whole_number(0, kMaxTokens))->capture_default_str();
  sub->add_option("--prefill-chunk", a->prefill_chunk,
                  "Prompt rows per slice of a layer in layer-major prefill, where a cache holding a layer's union "
                  "reads each expert once; 0 = the whole group")
      ->transform(whole_number(0, kMaxPrefillRows))
      ->capture_default_str();
  sub->add_option("--prefill-group", a->prefill_group,
                  "Prompt positions per layer-major pass; 0 = as many as 1 GiB of activations holds")
      ->transform(whole_number(0, kMaxTokens))
      ->capture_default_str();
  sub->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past the end-of-message token, for fixed-length benchmarks");
  add_session_options(sub, a->session);
  add_prompt_cache_options(sub, a->prompt_cache);
  sub->add_flag("--stats", a->stats, "Print per-token times, prefill and decode tokens/s and, with --store, what was read; see below");
  sub->add_option("--stats-json", a->stats_json, "Write every step's figures, and speculation's, as JSON to this file");
  sub->add_option("--tokens-out", a->tokens_out, "Write the generated token ids (comma-separated) to this file");
  sub->add_option("--draft", a->draft,
                  "Speculative decoding, which never changes the output: none, ngram (prompt lookup), replay:FILE (the "
                  "oracle: a previous run's --tokens-out), dspark:DIR (K3's DSpark checkpoint) or model:DIR, a small "
                  "Qwen3 checkpoint with tokenizer.json")
      ->capture_default_str();
  sub->add_option("--draft-k", a->draft_k, "Tokens drafted per step, 1-7; 0 = adapt to what pays")
      ->transform(whole_number(0, 7))
      ->capture_default_str();
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
