// The engine boundary: what `deltafin serve` (and any other front end) sees
// of a loaded model. An Engine owns one model of any family and runs
// generations on it one at a time: the caller hands the whole prompt and a
// token budget; the engine reuses the longest prefix it has kept (in RAM,
// or on disk with --prompt-cache-dir), prefills the rest, decodes through
// the one generation loop (engine/speculative_generate.h: plain decoding is
// its step with no drafter, speculation its step with one), reports each
// token, and keeps the final state for the next prompt that shares it. It
// says how much it reused (Outcome::cached_tokens).
//
// The header is narrow on purpose (antirez's ds4.h is the model): no
// tensors, sessions, caches or family types; a model's family shows only
// through its name, its ChatFormat and its TokenText. It is typed and formats
// no text: a request is a GenerateRequest, what the engine reports is data
// (ModelInfo, SessionInfo, RunStats: engine/run_stats.h) that its callers
// format (bench/run_report.h), and it includes nothing from io/.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "speculative/draft_spec.h"
#include "load/engine_options.h"
#include "engine/prefill_estimate.h"
#include "engine/run_stats.h"
#include "model/common/chat_format.h"
#include "tokenizer/token_text.h"

namespace deltafin {

struct LoadedModel;

// What a user sets.
struct EngineSettings {
  int64_t max_tokens_ceiling = 4096;          // the most one request may generate
  size_t prompt_cache_entries = 4;            // states kept in RAM for prompt reuse
  uint64_t prompt_cache_bytes = 1ull << 30;   // their RAM
  std::string prompt_cache_dir;               // prompt states on disk ("" = none)
  uint64_t prompt_cache_disk_bytes = 0;       // their disk budget (0 = none)
  int64_t context_limit = 0;                  // positions a session may hold; 0 = what the session budget holds
  uint64_t session_budget_bytes = 0;          // RAM for the running request's session; 0 = derived (engine.cpp)
  int64_t prefill_chunk = 64;                 // rows per prefill slice (engine/prefill.h)
  DraftSpec draft;                            // the drafter for every request (model/loaders/drafter_factory.h)
  int draft_k = 0;                            // tokens drafted per step, 0 = the controller adapts
  int64_t prefill_group = 0;                  // positions per layer-major pass (0 = engine/prefill.h's default)
  // Requests that may generate at once (`serve --parallel`). Above 1 their
  // passes are stepped together (engine/step_scheduler.h), in steps of at
  // most `step_rows` rows (0 = StepScheduler's default: 64 resident, 512 streamed).
  int parallel = 1;
  int64_t step_rows = 0;
  // Time a 32-position prefill and 32 more at construction, to seed the
  // prefill estimate (engine/prefill_estimate.h) before any request: `serve`
  // does, for admission by time; `run` and tests do not pay for it.
  bool calibrate_prefill = false;
};

// Tests only (Engine::set_test_hooks): slow a generation down so that a test
// can see it running, cancel it or queue behind it. No user option sets
// these; `serve` reads them from DELTAFIN_SERVE_STEP_DELAY_MS and
// DELTAFIN_SERVE_PREFILL_DELAY_MS for the tests that drive the binary.
struct EngineTestHooks {
  int step_delay_ms = 0;     // sleep per token
  int prefill_delay_ms = 0;  // sleep at each prefill progress report (each layer of each pass);
                             // with parallel > 1, after every step that runs prefill rows
  // Either > 0: the prefill estimate's rates are these, fixed (seconds per
  // position, per query-key pair), so a test of admission by time does not
  // depend on this machine's speed. A prefill slowed by prefill_delay_ms is
  // never taken as a measurement.
  double prefill_seconds_per_position = 0, prefill_seconds_per_pair = 0;
};

// What ends a generation besides max_new, the context limit and the caller.
struct StopRule {
  // false: the turn ends at its end token (a chat's end-of-turn tokens, a raw
  // completion's model end tokens); true: benchmarks generate past it, to max_new.
  bool ignore_end_token = false;
};

// A running request's progress, written by the engine as it goes and read
// by anyone (the server's keep-alives, /health).
struct LiveProgress {
  std::atomic<int> phase{0};  // 0 waiting or idle, 1 prefill, 2 decode
  std::atomic<int64_t> prompt_tokens{0}, prefill_done{0}, generated{0};
};

struct GenerateRequest {
  std::vector<uint32_t> prompt;  // non-empty, below context_limit()
  bool chat = false;             // a prompt rendered by chat(): ends at its end-of-turn token, drafted as a chat
  int64_t max_new = 0;           // the most tokens to generate
  StopRule stop;
  bool collect_stats = false;    // fill Outcome::stats (`run --stats`): per-step figures cost a little
  LiveProgress* progress = nullptr;  // where the engine tells this request's progress (may be null)
  // Each chosen token's logits, before on_token (tests compare them bit for bit; may be empty).
  std::function<void(const float* logits, size_t n)> on_logits;
  // Prompt reuse happens only between requests of one scope (the server
  // gives each API key its own: `serve --prompt-cache-scope`); "" is shared.
  std::string cache_scope;
};

enum class Finish { Eos, Length, Stopped, Cancelled };

struct Outcome {
  Finish finish = Finish::Length;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt positions restored from kept states (RAM or disk)
  int64_t disk_tokens = 0;        // of them, restored from a state kept on disk
  int64_t completion_tokens = 0;  // tokens handed to on_token (the end token is not one)
  double prefill_seconds = 0, seconds = 0;
  std::string drafter;  // the drafter this request used ("none" = plain decoding)
  std::optional<uint32_t> end_token;  // the end token that finished the turn (not handed to on_token)
  // With GenerateRequest::collect_stats: per-token times, prefill and TTFT,
  // session bytes, speculation, and for a streamed store every step's I/O,
  // the totals and route lookahead's gates.
  std::optional<RunStats> stats;
};

class Engine {
public:
  // Takes the model. Throws deltafin::Error when settings.context_limit
  // needs more session memory than the budget holds, naming both.
  Engine(std::unique_ptr<LoadedModel> model, EngineSettings settings, const std::atomic<bool>* shutdown);
  // Loads the model `source` names (either family) and takes it.
  Engine(const ModelSource& source, EngineSettings settings, const std::atomic<bool>* shutdown);
  // The same over a model the caller keeps alive (tests run several
  // engines, one after another, on one loaded model).
  Engine(LoadedModel& model, EngineSettings settings, const std::atomic<bool>* shutdown);
  ~Engine();

  // What the model is.
  uint32_t vocab() const;
  const TokenText& text() const;    // ordinary text <-> ids, token bytes
  const ChatFormat* chat() const;   // nullptr: chats are refused, chat_missing() says why
  std::string chat_missing() const;

  // Limits, fixed at construction (EngineSettings and the memory plan).
  int64_t context_limit() const;
  int64_t model_context() const;    // the model's own (max_position_embeddings)
  uint64_t session_budget_bytes() const;
  uint64_t session_bytes_per_position() const;
  // Session bytes of a request: `positions` held, `prompt` of them prefilled now.
  uint64_t session_bytes(int64_t positions, int64_t prompt) const;
  int64_t max_tokens_ceiling() const;
  std::string drafter() const;      // the drafting choice, for logs
  // What the model is: family, spine format, where the experts come from,
  // cache, lookahead, I/O engine, a streamed store's memory plan.
  ModelInfo model_info() const;
  // The session budget, bytes per position and fixed, and the context limit
  // with what set it (--context, the budget, the model).
  SessionInfo session_info() const;
  bool weight_exact() const;        // false for an int8-row spine
  double load_seconds() const;

  // Float32 logits [tokens x vocab] of every position of `tokens` on a fresh
  // session, run `step` positions per pass (0 = all at once): the values do
  // not depend on the step (design.md §5). Keeps nothing for reuse.
  std::vector<float> logits(const std::vector<uint32_t>& tokens, size_t step);

  // Generates from request.prompt: at most request.max_new tokens, ending
  // at the chat's end-of-turn token (request.chat) or the model's end token
  // unless request.stop says otherwise. on_token(id) gets each token and
  // returns false to stop there (a stop string, a client gone); `cancelled`
  // (may be empty) is asked between prefill passes and after each token. Not
  // reentrant: one caller at a time.
  Outcome generate(const GenerateRequest& request, const std::function<bool(uint32_t)>& on_token,
                   const std::function<bool()>& cancelled = nullptr);

  // Admission by time (engine/prefill_estimate.h): the estimated seconds to
  // prefill `positions` new positions after `before` kept ones, at the rates
  // measured so far; the rates and where they come from; and how much of
  // `prompt` a generation started now would reuse from the prompt caches
  // (RAM or disk) and not prefill. Safe while a generation runs.
  double estimate_prefill_seconds(int64_t positions, int64_t before) const;
  PrefillEstimate::Report prefill_estimate_report() const;
  int64_t reusable_prefix(const std::vector<uint32_t>& prompt, const std::string& scope = "") const;

  // Tests only: see EngineTestHooks. Safe while a generation runs.
  void set_test_hooks(const EngineTestHooks& hooks);

  // What a running generation is doing, for /health.
  struct Progress {
    std::string phase = "idle";  // "idle", "prefill", "decode"
    int64_t prompt_tokens = 0, prefill_done = 0, generated = 0;
    static Progress of(const LiveProgress& p);
  };
  // The oldest running generation's ("idle" when none runs).
  Progress progress() const;
  // Every running generation's, oldest first.
  std::vector<Progress> running() const;
  int parallel() const;
  // The concurrent steps so far (all zero with parallel 1).
  struct StepTotals {
    int64_t steps = 0, rows = 0, parts = 0, prefill_rows = 0, decode_rows = 0, max_parts = 0;
  };
  StepTotals step_totals() const;

  // Totals since start, for /health and the prompt-reuse tests.
  struct Totals {
    int64_t requests = 0, prefill_positions = 0, reused_positions = 0, generated_tokens = 0;
    int64_t spec_rounds = 0, spec_drafted = 0, spec_accepted = 0;
    size_t cache_entries = 0;
    uint64_t cache_bytes = 0;
    int64_t disk_hits = 0, disk_writes = 0, disk_rejected = 0, disk_evicted = 0;  // all 0 without a disk cache
    uint64_t disk_bytes = 0;
  };
  Totals totals() const;

  bool shutting_down() const;
  // Writes the expert heat histogram back to the store (streamed models).
  void save_heat();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deltafin
