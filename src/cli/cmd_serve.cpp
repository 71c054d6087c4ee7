// deltafin serve: the OpenAI- and Anthropic-compatible HTTP server
// (src/server/http_server.h).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "bench/run_report.h"
#include "model/loaders/drafter_factory.h"
#include "platform/poller.h"
#include "engine/engine.h"
#include "engine/step_scheduler.h"
#include "server/http_server.h"
#include "util/error.h"

namespace deltafin::cli {

namespace {

std::atomic<bool> g_shutdown{false};
extern "C" void on_signal(int) { g_shutdown.store(true); }

struct ServeArgs {
  ModelArgs model;
  ServerOptions server;
  int64_t max_tokens = 4096;
  size_t prompt_cache_slots = 4;
  double prompt_cache_mb = 1024;
  int64_t prefill_chunk = kDefaultPrefillChunk;
  std::string draft = "auto", dspark, draft_model;
  int draft_k = 0;
  SessionArgs session;
  PromptCacheArgs prompt_cache;
  double header_timeout_s = 10, body_timeout_s = 60, idle_timeout_s = 10, keepalive_s = 5;
  int parallel = 4;
  std::optional<double> max_prefill_seconds;
  int64_t step_rows = 0;
  std::vector<std::string> api_key_files;
  std::string prompt_cache_scope = "key";
};

// --api-key-file: one key per line (blank lines and # comments skipped), so
// that keys need not stand on a command line that `ps` shows.
void read_api_key_files(const std::vector<std::string>& files, std::vector<std::string>& keys) {
  for (const std::string& path : files) {
    std::ifstream in(path);
    if (!in) fail("--api-key-file ", path, ": cannot be read");
    std::string line;
    for (int no = 1; std::getline(in, line); ++no) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      const size_t first = line.find_first_not_of(" \t");
      if (first == std::string::npos || line[first] == '#') continue;
      line = line.substr(first);
      if (line.find_first_of(" \t") != std::string::npos)
        fail("--api-key-file ", path, " line ", no, ": a key holds no spaces (one key per line)");
      keys.push_back(line);
    }
  }
}

std::string default_model_name(const ModelArgs& a) {
  std::string dir = a.model.empty() ? a.store : a.model;
  std::string name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();
  return name.empty() ? "deltafin" : name;
}

// The start line about admission by time: the calibrated rates and what they
// make of a 1,000- and a 32,000-token prompt, against the limit.
std::string describe_prefill_limit(const Engine& engine, double limit) {
  const PrefillEstimate::Report r = engine.prefill_estimate_report();
  return cat("prefill estimate (", r.source, "): ", r.seconds_per_position, " s per position, ", r.seconds_per_pair,
             " s per query-key pair; a 1k-token prompt ", engine.estimate_prefill_seconds(1000, 0), " s, 32k ",
             engine.estimate_prefill_seconds(32000, 0), " s; --max-prefill-seconds ",
             limit > 0 ? cat(limit, " s") : std::string("0 (no limit)"));
}

int serve(ServeArgs a) {
  // Checked before the model loads (a K3 spine takes minutes), so a wrong
  // DELTAFIN_POLLER fails at once; the event loop reads it again.
  const platform::PollerBackend poller = platform::poller_backend_from_env();
  if (a.server.model_name.empty()) a.server.model_name = default_model_name(a.model);
  EngineSettings so;
  so.max_tokens_ceiling = a.max_tokens;
  so.prompt_cache_entries = a.prompt_cache_slots;
  so.prompt_cache_bytes = static_cast<uint64_t>(a.prompt_cache_mb * 1e6);
  so.prefill_chunk = a.prefill_chunk;
  so.draft = parse_draft_spec(a.draft);
  if (so.draft.kind == DraftSpec::Kind::Replay)
    fail("--draft ", a.draft, ": replay is for benchmarks of one prompt, not a server");
  // --dspark and --draft-model are what auto may choose from (a dspark:DIR or
  // model:DIR spec names its own).
  if (so.draft.head_dir.empty()) so.draft.head_dir = a.dspark;
  if (so.draft.model_dir.empty()) so.draft.model_dir = a.draft_model;
  so.draft_k = a.draft_k;
  so.parallel = a.parallel;
  so.step_rows = a.step_rows;
  read_api_key_files(a.api_key_files, a.server.api_keys);
  a.server.prompt_cache_scope = a.prompt_cache_scope == "global" ? PromptCacheScope::Global : PromptCacheScope::Key;
  a.session.apply(so);
  so.prompt_cache_dir = a.prompt_cache.dir_for(a.model);
  so.prompt_cache_disk_bytes = a.prompt_cache.budget_bytes();
  so.calibrate_prefill = true;  // seeds admission by time (--max-prefill-seconds) before the first request
  a.server.header_timeout_ms = static_cast<int64_t>(a.header_timeout_s * 1000);
  a.server.body_timeout_ms = static_cast<int64_t>(a.body_timeout_s * 1000);
  a.server.idle_timeout_ms = static_cast<int64_t>(a.idle_timeout_s * 1000);
  a.server.keepalive_ms = static_cast<int64_t>(a.keepalive_s * 1000);
  g_shutdown.store(false);
  Engine engine(model_source(a.model), so, &g_shutdown);
  EngineTestHooks hooks;  // tests only
  if (const char* d = std::getenv("DELTAFIN_SERVE_STEP_DELAY_MS")) hooks.step_delay_ms = std::atoi(d);
  if (const char* d = std::getenv("DELTAFIN_SERVE_PREFILL_DELAY_MS")) hooks.prefill_delay_ms = std::atoi(d);
  engine.set_test_hooks(hooks);
  std::fprintf(stderr, "%s\n", describe_model(engine.model_info()).c_str());
  std::fprintf(stderr, "serve: speculative drafting: %s\n", engine.drafter().c_str());
  // On a streamed store the linear estimate, fitted to short prompts (which
  // read more experts per position than a long prompt's large passes), puts
  // an ordinary 1k-token prompt above ten minutes: no default limit there.
  a.server.max_prefill_seconds =
      a.max_prefill_seconds.value_or(engine.model_info().stream ? 0.0 : kDefaultMaxPrefillSeconds);
  std::fprintf(stderr, "serve: %s\n", describe_prefill_limit(engine, a.server.max_prefill_seconds).c_str());
  if (!engine.chat()) std::fprintf(stderr, "serve: chat completions are refused: %s\n", engine.chat_missing().c_str());
  ApiServer server(engine, a.server);
  const int port = server.bind();
  if (a.server.host != "127.0.0.1" && a.server.host != "::1" && a.server.host != "localhost")
    std::fprintf(stderr, "serve: WARNING: listening on %s, reachable from other machines%s\n", a.server.host.c_str(),
                 a.server.api_keys.empty() ? " with no --api-key" : "");
  std::fprintf(stderr,
               "serve: listening on http://%s:%d (model \"%s\", context %lld tokens, session budget %.1f MB, parallel %d, "
               "queue %zu, at most %zu connections, %zu API key(s), prompt reuse scoped %s)\n",
               a.server.host.c_str(), port, a.server.model_name.c_str(), static_cast<long long>(engine.context_limit()),
               static_cast<double>(engine.session_budget_bytes()) / 1e6, engine.parallel(), a.server.queue,
               a.server.max_connections, a.server.api_keys.size(),
               a.server.api_keys.empty() ? "globally (no keys)" : a.prompt_cache_scope == "global" ? "globally" : "per key");
  if (const char* p = std::getenv("DELTAFIN_POLLER"); p && *p)
    std::fprintf(stderr, "serve: event loop: %s (DELTAFIN_POLLER)\n", platform::poller_name(poller));
  std::fflush(stderr);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // SIGINT / SIGTERM: the handler only sets the flag; this thread turns it
  // into a graceful stop (no new connections, the running request cancelled
  // within about a second of model time, queued ones answered 503), then
  // the heat histogram is saved.
  std::atomic<bool> served{false};
  std::chrono::steady_clock::time_point signalled{};
  std::thread watcher([&] {
    while (!served.load()) {
      if (g_shutdown.load()) {
        if (signalled == std::chrono::steady_clock::time_point{}) {
          signalled = std::chrono::steady_clock::now();
          std::fprintf(stderr, "serve: stopping (signal): cancelling the running request, answering queued ones 503\n");
        }
        server.stop();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  server.serve();
  served.store(true);
  g_shutdown.store(true);
  watcher.join();
  engine.save_heat();
  if (signalled != std::chrono::steady_clock::time_point{})
    std::fprintf(stderr, "serve: stopped %.3f s after the signal\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count());
  else
    std::fprintf(stderr, "serve: stopped\n");
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand(
      "serve", "OpenAI- and Anthropic-compatible HTTP server (chat and text completions, Messages API, SSE streaming)");
  sub->footer(R"(Routes: GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions, POST /v1/completions (OpenAI);
POST /v1/messages, POST /v1/messages/count_tokens (Anthropic, docs/anthropic-api.md); GET /health (no key
needed). JSON, or server-sent events with stream: true (stream_options.include_usage adds a final usage
chunk). The key (--api-key) comes as 'Authorization: Bearer KEY' or 'x-api-key: KEY'. Listens on
loopback unless --host says otherwise (and warns when it does). Agents, tools and each API's dialect:
docs/agents.md; the HTTP layer, its limits and timeouts: docs/http.md.

Up to --parallel requests generate at once, stepped together: each step is one pass over every running
request's rows (decode rows first, then prompt slices sharing --step-rows, oldest first), with the experts
applied once to the union of their routes; every request gets exactly the bits it gets alone
(docs/serving.md). Admission counts every running session against the session budget; --queue more wait
in arrival order, beyond that 429 with Retry-After. A client
that disconnects while waiting, while its prompt is prefilled or while its tokens are made is noticed and
its work stops within about 20 ms of model time (the prefill is checked between slices, experts and
attention heads, not only between layers); it is logged as cancelled. SIGINT / SIGTERM stop
gracefully: no new connections, the running requests cancelled the same way (a stream ends with a 503
shutting_down event and no [DONE]), queued requests answered 503 shutting_down, heat saved.

Admission by cost: a request's session (KDA state, MLA caches of every position, the prefill pass's
activations) must fit the session budget, by default 80% of the RAM the spine, expert cache, pinned
experts and prompt cache leave. --context defaults to the most positions that budget holds (at most the
model's max_position_embeddings); a --context above it is refused at start, and a prompt at or over the
context gets a 400 context_length_exceeded giving its token count and session bytes against the context
and the budget. /health reports the context, the budget, the session bytes per position, the running
request's phase (idle, prefill with tokens done of total, decode with tokens made), the queue, the
connections and speculation's rounds, drafted and accepted tokens.

Admission by time: a request whose prefill is estimated above --max-prefill-seconds (default 600 resident, none streamed: ten
minutes, the OpenAI and Anthropic SDKs' default timeout, so their default client gives up first; a
megabyte of hostile prompt costs hours) gets a 400 prefill_too_long naming its tokens, the estimate and
the limit; 0 = no limit. The estimate is a x positions + b x query-key pairs over the positions it would
not reuse from a kept state, at rates fitted to every prefill that ran alone (decayed least squares),
seeded at start by timing two 32-position passes (on a streamed store they read those positions'
experts).
/health's "prefill_estimate" gives the rates, their source and a 1k- and 32k-token prompt's estimate; a
429 says how much estimated prefill the line holds. docs/http.md: the model and its limits.

Prompt reuse: after each request the session state is kept (snapshots at the prompt's last-but-one
position and at the end of the output; --prompt-cache-slots entries, LRU, at most --prompt-cache-mb); a
request whose tokens start with a kept prefix continues from it (usage.prompt_tokens_details.
cached_tokens says how many positions were reused), bit-identical to a cold run. The state at each
prompt's last whole block of 256 tokens is also written to disk (docs/prompt-states.md), so a restarted
server continues any prompt that shares those blocks.

Decoding is greedy, always: temperature must be 0 or absent (anything else is a 400: sampling is a
promise deltafin does not keep); top_p in (0, 1] is accepted (the argmax is always inside the nucleus);
seed is accepted and has no effect. Chat answers come split into reasoning_content (the think block) and
content; stop strings apply to content and to completion text and are not returned. finish_reason is
"stop" (end of message or a stop string), "length" (max_tokens or the context) or "tool_calls".
Speculative decoding is on for every request (--draft auto): a chat is drafted by DSpark when --dspark is
given, a raw completion by --draft-model when given (else DSpark), otherwise by n-gram prompt lookup; each
request's controller switches drafting off while it does not pay. It never changes an output bit.

Validation: every field is checked; unknown fields, wrong types, out-of-range values and features not
honoured (images, logprobs, n > 1, batched prompts) get HTTP 400 {"error": {"message", "type", "param",
"code"}} naming the field; an unknown model 404; a wrong key 401; a wrong Content-Type 415; a body over
--max-request-bytes 413.)");
  add_model_options(sub, a->model);
  sub->add_option("--host", a->server.host, "Address to listen on; loopback unless told otherwise")->capture_default_str();
  sub->add_option("--port", a->server.port, "Port; 0 = any free port, printed at start")->transform(whole_number(0, 65535))->capture_default_str();
  sub->add_option("--api-key", a->server.api_keys,
                  "Require a key on /v1 routes, as 'Authorization: Bearer KEY' or 'x-api-key: KEY'; repeat for several keys");
  sub->add_option("--api-key-file", a->api_key_files, "Keys one per line (# comments), beside or instead of --api-key")
      ->check(CLI::ExistingFile);
  sub->add_option("--prompt-cache-scope", a->prompt_cache_scope,
                  "key: a request reuses only prompt states of its own API key (a reused prefix shows in cached_tokens "
                  "and in the time to first token, so one key could learn what another sent); global: shared")
      ->check(CLI::IsMember({"key", "global"}))
      ->capture_default_str();
  sub->add_option("--parallel", a->parallel,
                  "Requests that generate at once, each with its own session within the session budget; 1 = one at a time")
      ->transform(whole_number(1, 256))
      ->capture_default_str();
  sub->add_option("--step-rows", a->step_rows,
                  "Rows per concurrent step: decode rows first, the rest to the prompts being prefilled; "
                  "default 64 resident, 512 for a streamed store (its steps cost their experts' reads)")
      ->transform(whole_number(1, 1 << 20));
  sub->add_option("--queue", a->server.queue, "Requests that may wait behind the generating ones; more get 429")
      ->transform(whole_number(0, 4096))
      ->capture_default_str();
  sub->add_option("--max-prefill-seconds", a->max_prefill_seconds,
                  "Refuse (400 prefill_too_long) a prompt whose prefill is estimated above this many seconds; "
                  "0 = no limit. Default: 600 (the OpenAI and Anthropic SDKs' default timeout) for a resident model; "
                  "none for a streamed store, whose estimate from short prompts overstates a long one's expert reads")
      ->check(number(0));
  sub->add_option("--max-tokens", a->max_tokens, "Most tokens one request may generate, and the default")
      ->transform(whole_number(1, kMaxTokens))
      ->capture_default_str();
  sub->add_option("--max-request-bytes", a->server.max_request_bytes, "Largest request body")
      ->transform(whole_number(1024, int64_t{1} << 32))
      ->capture_default_str();
  sub->add_option("--served-model-name", a->server.model_name, "The model id clients use; default the model directory's name");
  sub->add_option("--prompt-cache-slots", a->prompt_cache_slots, "Session states kept in RAM for prompt reuse; 0 = none")
      ->transform(whole_number(0, 1024))
      ->capture_default_str();
  sub->add_option("--prompt-cache-mb", a->prompt_cache_mb, "MB of RAM for the kept session states")
      ->check(number(0))
      ->capture_default_str();
  add_session_options(sub, a->session);
  add_prompt_cache_options(sub, a->prompt_cache);
  sub->add_option("--max-connections", a->server.max_connections, "Open connections at once; more are answered 503")
      ->transform(whole_number(1, 65536))
      ->capture_default_str();
  sub->add_option("--header-timeout", a->header_timeout_s, "Seconds a request's whole header block may take to arrive")
      ->check(number(0.05, 3600))
      ->capture_default_str();
  sub->add_option("--body-timeout", a->body_timeout_s, "Seconds a request's whole body may take to arrive")
      ->check(number(0.05, 3600))
      ->capture_default_str();
  sub->add_option("--idle-timeout", a->idle_timeout_s, "Seconds a keep-alive connection may wait for its next request")
      ->check(number(0.05, 3600))
      ->capture_default_str();
  sub->add_option("--keepalive", a->keepalive_s,
                  "Seconds a streamed response may send nothing (queued, or in a long prefill) before an SSE comment, "
                  "keep-alive or prefill progress, keeps the client's connection; 0 = never")
      ->check(number(0, 3600))
      ->capture_default_str();
  sub->add_option("--prefill-chunk", a->prefill_chunk, "Prompt rows per prefill slice of a layer")
      ->transform(whole_number(1, kMaxPrefillRows))
      ->capture_default_str();
  sub->add_option("--draft", a->draft,
                  "Speculative decoding for every request, which never changes the output and is switched off per "
                  "request while it does not pay: auto (the best of what is given), none, ngram, dspark:DIR or model:DIR")
      ->capture_default_str();
  sub->add_option("--draft-k", a->draft_k, "Tokens drafted per step, 1-7; 0 = adapt per request to what pays")
      ->transform(whole_number(0, 7))
      ->capture_default_str();
  sub->add_option("--dspark", a->dspark, "A DSpark checkpoint for --draft auto, for chats and completions");
  sub->add_option("--draft-model", a->draft_model, "A small Qwen3 checkpoint for --draft auto, for raw completions");
  sub->add_option("--http-threads", a->server.http_threads, "Generation worker threads; 0 = queue + parallel + 4")
      ->transform(whole_number(0, kMaxThreads))
      ->capture_default_str();
  return {sub, [a] { return serve(*a); }};
}

}  // namespace deltafin::cli
