// The generation loop, for every model family: prefill (engine/prefill.h),
// then steps that may draft tokens and verify them in one multi-position pass
// (speculative/verifier.h); with no drafter every step is one plain decode step.
// Every emitted token is the target's greedy choice at its position, so the
// token stream, the logits behind each token and the session state at the
// end equal plain decoding's.
#pragma once

#include <array>

#include "engine/generate.h"
#include "speculative/draft_controller.h"
#include "speculative/drafter.h"

namespace deltafin {

struct SpecParams {
  Drafter* drafter = nullptr;  // nullptr: plain decoding through this loop
  int max_draft = DraftController::kMaxDraft;
  int fixed_k = 0;  // > 0: draft exactly this many each step (benchmarks); 0: the controller adapts
};

// SpecStats, speculation's figures: engine/run_stats.h.
static_assert(DraftController::kMaxDraft == kMaxDraftTokens, "SpecStats::rounds_by_k holds a count per k");

// on_token and the stop rules are those of generate(); `on_logits`, when set,
// is told the logits row behind every emitted token (tests compare it with
// plain decoding's). The prefill's first token has its row from the prefill.
GenerateStats generate_speculative(CausalModel& model, ModelSession& session, const std::vector<uint32_t>& prompt,
                                   const GenerateParams& params, const SpecParams& spec, SpecStats* stats,
                                   const std::function<void(uint32_t)>& on_token,
                                   const std::function<void(const float* logits, size_t n)>& on_logits = {});

}  // namespace deltafin
