// What the engine reports, as data: the model as loaded (ModelInfo,
// load/model_info.h), a session's limits (SessionInfo) and one generation's figures (RunStats:
// per-token times, prefill and TTFT, the session's bytes, how speculation
// went, and for a streamed store every step's I/O, the totals and route
// lookahead's gates). The engine formats none of it: `run --stats`,
// `--stats-json`, `serve` and `bench` do (bench/run_report.h). Included by
// the engine boundary, so nothing here comes from io/.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "load/model_info.h"

namespace deltafin {

// Why the generation loop stopped.
enum class StopReason { Eos, MaxNew, ContextFull, Interrupted };
const char* stop_reason_name(StopReason r);

// The generation loop's figures (engine/generate.h).
struct GenerateStats {
  int64_t prompt_tokens = 0, new_tokens = 0;
  double prefill_seconds = 0;
  double ttft_seconds = 0;       // start to the first generated token (prefill + choosing it)
  std::vector<double> token_ms;  // per generated token after the first (decode steps)
  StopReason reason = StopReason::MaxNew;
};

// Speculation's figures (engine/speculative_generate.h).
inline constexpr int kMaxDraftTokens = 7;  // the most tokens one round drafts (DraftController::kMaxDraft)
struct SpecStats {
  int64_t plain_steps = 0, rounds = 0;         // one-position steps; verification passes
  int64_t drafted = 0, accepted = 0;           // draft tokens proposed / accepted in rounds
  int64_t round_tokens = 0;                    // tokens emitted by rounds (accepted + the target's own)
  double draft_seconds = 0, round_seconds = 0, plain_seconds = 0;
  std::array<int64_t, kMaxDraftTokens + 1> rounds_by_k{};  // rounds per number drafted
  double acceptance() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
  // Decode tokens (after the first) per decode step, rounds and plain steps together.
  double tokens_per_step() const {
    const int64_t steps = plain_steps + rounds;
    return steps ? static_cast<double>(plain_steps + round_tokens) / steps : 0.0;
  }
};

// One forward pass of a streamed run (engine/stats_collector.h).
struct StepStats {
  bool prefill = false;
  uint64_t positions = 0;          // rows of the pass
  uint64_t unique_new = 0;         // prefill: (layer, expert) pairs routed to for the first time in this prefill
  double ms = 0, wait_ms = 0;
  uint64_t bytes_read = 0, demanded = 0, hits = 0, prefetch_hits = 0, inflight = 0, misses = 0;
  uint64_t prefetch_issued = 0, prefetch_cancelled = 0, prefetch_gated = 0;
  uint64_t pilot_hits = 0, pilot_actual = 0;
  uint64_t fetched = 0, fetch_bytes = 0;  // streamed stores: experts fetched from the mirror, body bytes
  double fetch_s = 0;                     // summed fetch time (parallel fetches overlap)
  std::vector<double> drive_mb_s;  // bytes each drive completed during the step / step time
  // Per layer (index = layer; 0 for layers without routed experts): the
  // expert phase's time and the waiting for reads within it, ms.
  std::vector<double> layer_expert_ms, layer_wait_ms;
};

// The prompt's expert-major figures: unique (layer, expert) pairs its
// routes touched, their bytes, bytes read during prefill passes, and
// amplification = read / unique bytes (1.00 = every needed expert read
// exactly once; lookahead reads of experts the prompt never used count).
struct PrefillTotals {
  uint64_t positions = 0, passes = 0, unique_pairs = 0, unique_bytes = 0, bytes_read = 0;
  double ms = 0;
  double amplification() const { return unique_bytes ? static_cast<double>(bytes_read) / unique_bytes : 0.0; }
};

// A streamed store's fetches from its mirror (remote/expert_fetcher.h's
// FetchCounters), totals since the model loaded.
struct MirrorTotals {
  uint64_t fetched = 0, bytes = 0, failed = 0, refused = 0, retries = 0;
  uint64_t evicted = 0, evicted_bytes = 0, not_kept = 0, install_failed = 0;
  std::string last_install_error;
  double seconds = 0;
};

// What one request's session may hold.
struct SessionInfo {
  uint64_t budget_bytes = 0, bytes_per_position = 0, fixed_bytes = 0;
  int64_t context_limit = 0;
  enum class LimitBy { Option, Budget, Model } limit_by = LimitBy::Model;  // --context, what the budget holds, the model's own
};

// One generation's figures (GenerateRequest::collect_stats).
struct RunStats {
  ModelInfo model;
  GenerateStats generate;
  uint64_t session_bytes = 0;  // the session at the end
  int64_t session_length = 0;
  uint64_t session_fixed_bytes = 0, session_bytes_per_position = 0;
  std::string drafter;         // "none" for plain decoding
  SpecStats spec;
  // Streamed stores only (empty / 0 resident):
  std::vector<StepStats> steps;        // every forward pass, in order
  PrefillTotals prefill;
  std::optional<MirrorTotals> mirror;  // a store with a mirror
  // Route lookahead's gates, one line per layer (predictor, recall EMA,
  // samples), as the family describes them (RouteLookaheadReport::describe_gates).
  std::optional<std::string> lookahead_gates;
  uint64_t peak_rss_bytes = 0;
};

}  // namespace deltafin
