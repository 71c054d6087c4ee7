// The model side of the server: turns a validated request into prompt
// tokens, runs greedy generation on the one model with prompt reuse, and
// reports every token to the caller, who may stop it after any token. The
// server lets only one request at a time in here (Admission), so nothing
// below is shared between generations.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "engine/prefill.h"
#include "engine/prompt_disk_cache.h"
#include "server/api/request.h"
#include "server/prompt_cache.h"
#include "spec/drafter_factory.h"

namespace deltafin {

struct ServiceOptions {
  int64_t max_tokens_ceiling = 4096;   // --max-tokens: the most a request may ask for
  size_t prompt_cache_entries = 4;     // --prompt-cache-slots
  uint64_t prompt_cache_bytes = 1ull << 30;  // --prompt-cache-mb
  std::string prompt_cache_dir;               // --prompt-cache-dir: prompt states on disk ("" = none)
  uint64_t prompt_cache_disk_bytes = 0;       // --prompt-cache-disk-gb: their disk budget (0 = none)
  int64_t context_limit = 0;           // --context: positions a session may hold; 0 = what the session budget holds
  uint64_t session_budget_bytes = 0;   // --session-budget-mb: RAM for the running request's session; 0 = derived (below)
  int64_t prefill_chunk = 64;          // rows per prefill slice (engine/prefill.h)
  int step_delay_ms = 0;               // tests only (DELTAFIN_SERVE_STEP_DELAY_MS): sleep per token
  std::string draft = "auto";          // --draft: the drafter for every request (spec/drafter_factory.h)
  std::string dspark_dir, draft_model_dir;  // --dspark, --draft-model: what "auto" may choose from
  int draft_k = 0;                     // --draft-k: tokens drafted per step, 0 = the controller adapts
};

struct PreparedPrompt {
  std::vector<uint32_t> tokens;
  bool chat = false;
  bool thinking = false;  // chat: the prompt ends with open(think)
  int64_t max_new = 0;    // max_tokens, else the ceiling, capped by the context left
};

enum class Finish { Eos, Length, Stopped, Cancelled };

struct Outcome {
  Finish finish = Finish::Length;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt positions restored from the prompt cache (RAM or disk)
  int64_t disk_tokens = 0;        // of them, restored from a state kept on disk
  int64_t completion_tokens = 0;  // tokens handed to on_token (the end-of-message token is not one)
  double prefill_seconds = 0, seconds = 0;
  std::string drafter;  // the drafter this request used ("none" = plain decoding)
};

// Admission by cost. A request's session (the KDA state, the MLA caches of
// every position, a prefill pass's activations) must fit the session budget:
// by default 80 % of the RAM left once the spine, the expert cache, the pinned
// experts and the prompt cache have theirs (store runs: the memory plan's
// figures; resident runs: what is available after loading). The context
// limit defaults to the most positions that budget holds (and never more
// than the model's max_position_embeddings); a --context above it is refused
// at start, naming both numbers.
class GenerationService {
public:
  // Throws deltafin::Error when --context needs more than the session budget.
  GenerationService(LoadedK3& model, ServiceOptions options, const std::atomic<bool>* shutdown);

  // Tokens of the request (chat template or raw text or ids) and its token
  // budget. Throws api::ApiError: 400 when the chat does not render or the
  // prompt does not fit the context (the message gives the prompt's tokens
  // and session bytes against the context limit and the session budget).
  PreparedPrompt prepare(const api::GenerationRequest& request) const;

  // Generates. on_token(id) gets each new token and returns false to stop
  // there (a stop string matched, or the client left); `cancelled` is also
  // asked between prefill passes. Not reentrant: one caller at a time.
  Outcome run(const PreparedPrompt& prompt, const std::function<bool(uint32_t)>& on_token,
              const std::function<bool()>& cancelled);

  const Tokenizer& tokenizer() const { return *m_.tokenizer; }
  const K3Config& config() const { return m_.config; }
  int64_t context_limit() const { return context_limit_; }
  uint64_t session_budget_bytes() const { return session_budget_; }
  // Session bytes of a request: `positions` held, `prompt` of them prefilled now.
  uint64_t session_bytes(int64_t positions, int64_t prompt) const;

  // What the running request is doing, for /health.
  struct Progress {
    std::string phase = "idle";  // "idle", "prefill", "decode"
    int64_t prompt_tokens = 0, prefill_done = 0, generated = 0;
  };
  Progress progress() const;
  int64_t max_tokens_ceiling() const { return o_.max_tokens_ceiling; }
  bool shutting_down() const { return shutdown_ && shutdown_->load(); }
  std::string draft() const { return drafters_.describe(); }

  // Totals since start, for /health and the prompt-reuse tests.
  struct Totals {
    int64_t requests = 0, prefill_positions = 0, reused_positions = 0, generated_tokens = 0;
    int64_t spec_rounds = 0, spec_drafted = 0, spec_accepted = 0;  // speculation: verification rounds, drafts
    size_t cache_entries = 0;
    uint64_t cache_bytes = 0;
    PromptDiskCache::Stats disk;  // all zero without a disk cache
  };
  Totals totals() const;

private:
  // The heat histogram in memory is always current; heat.json (written with
  // an fsync and a rename) is read only by the next start (pinning) and by
  // setup (replication). Writing it after every request cost a busy server a
  // disk flush per request, so it is written at the end of the request that
  // makes kHeatSaveRequests since the last write, or of the first one after
  // kHeatSaveInterval has passed, whichever comes first: a crash loses the
  // heat of fewer than kHeatSaveRequests requests. `deltafin serve` writes it
  // once more at exit (cli/cmd_serve.cpp).
  static constexpr int kHeatSaveRequests = 32;
  static constexpr std::chrono::seconds kHeatSaveInterval{60};
  void note_request_for_heat();  // run() only: one caller at a time

  LoadedK3& m_;
  ServiceOptions o_;
  uint64_t session_budget_ = 0;
  int64_t context_limit_ = 0;
  std::atomic<int> phase_{0};  // 0 idle, 1 prefill, 2 decode
  std::atomic<int64_t> prompt_tokens_{0}, prefill_done_{0}, generated_{0};
  const std::atomic<bool>* shutdown_;
  PromptCache cache_;
  std::unique_ptr<PromptDiskCache> disk_;  // prompt states on disk, when a directory is given
  DrafterFactory drafters_;  // loaded once; each request gets its own drafter
  mutable std::mutex totals_mu_;
  Totals totals_;
  int heat_unsaved_requests_ = 0;
  std::chrono::steady_clock::time_point heat_saved_at_ = std::chrono::steady_clock::now();
};

}  // namespace deltafin
