// What the generation loop (engine/speculative_generate.h: plain decoding is its
// step with no drafter) is told and reports: prefill the prompt, then greedy
// decoding until the end-of-message token, the token budget, the context
// limit or an interrupt. Greedy is the only decoding (k3-model.md §7.8).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/prefill.h"
#include "engine/run_stats.h"
#include "model/common/causal_model.h"

namespace deltafin {

// Told before and after every forward pass (the prefill, then each decode
// step), e.g. to attribute bytes read and cache hits to tokens.
class StepObserver {
public:
  virtual ~StepObserver() = default;
  virtual void step_begin(bool prefill) = 0;
  virtual void step_end(bool prefill) = 0;
};

struct GenerateParams {
  int64_t max_new = 256;
  int64_t context_limit = 0;               // 0 = the model's context (ModelSummary::context)
  // The tokens that end the turn, the usual one first (K3: <|end_of_msg|>;
  // a Qwen3 chat: <|im_end|>, <|endoftext|>); empty: none ends it.
  std::vector<uint32_t> eos;
  bool ignore_eos = false;                 // benchmarks: keep going past eos for a fixed token count
  // One of `eos`, and not ignored: where the turn ends.
  bool ends_turn(uint32_t token) const;
  const std::atomic<bool>* stop = nullptr; // set by a signal handler: stop after the current token
  StepObserver* observer = nullptr;
  int64_t prefill_chunk = kDefaultPrefillChunk;  // rows per prefill slice (engine/prefill.h); 0 = whole group
  int64_t prefill_group = 0;                     // positions per layer-major prefill pass; 0 = by memory (prefill_group_rows)
  // Asked like `stop` (between prefill passes, inside long ones, and after
  // every token) where a flag does not fit: a client that left, a stop
  // string matched. Either one ends the run as Interrupted.
  std::function<bool()> cancelled;
  // Told how many prompt tokens are done, during the prefill (progress).
  std::function<void(int64_t done)> on_prefill_progress;
  // The session already holds prompt[0, prompt_done) (a state restored from
  // RAM or disk), so the prefill starts there; and the prefill stops at each
  // length in `pause_at` (ascending) with prompt_done < length < the
  // prompt's size and tells at_pause the session there (to mark it: prompt
  // reuse keeps such states). Neither changes a bit of the output.
  int64_t prompt_done = 0;
  std::vector<int64_t> pause_at;
  std::function<void(const ModelSession&)> at_pause;
};

// StopReason and GenerateStats, the loop's figures: engine/run_stats.h.

// The rules of the generation loop, also used by the server's request loop
// so they cannot drift apart. generation_limit: the context limit in effect;
// it fails, naming the sizes, when the prompt is empty or does not fit.
int64_t generation_limit(const ModelSummary& model, const GenerateParams& p, int64_t session_length, size_t prompt_tokens);
// Checked after each emitted token; `length` is the session length plain
// decoding has at that point. Sets st.reason when it says stop.
bool stop_after_token(const GenerateParams& p, uint32_t token, int64_t new_tokens, int64_t length, int64_t limit,
                      GenerateStats& st);

// prefill()'s `cancelled` for the stop flag and callback: empty when there
// is neither, so prefill takes no rollback snapshot it can never need.
std::function<bool()> stop_requested(const GenerateParams& p);

}  // namespace deltafin
