// One decode step with optional speculation, for any generation loop (the CLI's
// generate_speculative, the server's request loop): the loop keeps its own
// stop rules and token reporting; the stepper drafts, verifies, and commits
// only the rows the loop actually used.
//
//   tokens = stepper.step(session, history)  // history ends with `next`, not yet run
//   for each t in tokens: the loop handles t as plain decoding would handle the
//     target's next choice, and stops wherever it would
//   stepper.commit(session, handled)        // rows for the tokens handled
//
// tokens[i] is the target's greedy choice after row i of the pass, rows being
// [next, d1, ..]; so handling j tokens consumed j rows, exactly as j plain
// steps would have. A plain step (nothing drafted) returns one token.
#pragma once

#include <optional>
#include <span>

#include "speculative/draft_controller.h"
#include "speculative/drafter.h"
#include "speculative/verifier.h"

namespace deltafin {

struct SpecStats;

class SpeculativeStepper {
public:
  // drafter may be null (always plain steps); stats may be null.
  SpeculativeStepper(CausalModel& model, Drafter* drafter, int max_draft, int fixed_k, SpecStats* stats);

  // Drafts at most `budget` tokens (what the loop may still emit minus one,
  // capped by the context), runs the step, returns the target's choices.
  // `logits`, when not null, receives the logits row behind each of them.
  // Drafts are cut after the first of these tokens (a stateless drafter
  // knows nothing after an end of message, §10.1); empty for runs that
  // ignore them.
  void set_draft_stop(std::vector<uint32_t> ends) { draft_stop_ = std::move(ends); }

  std::vector<uint32_t> step(ModelSession& session, std::span<const uint32_t> history, int64_t budget,
                             std::vector<std::vector<float>>* logits = nullptr);
  void commit(ModelSession& session, size_t handled);

private:
  CausalModel& model_;
  Drafter* drafter_;
  DraftController controller_;
  Verifier verifier_;
  SpecStats* stats_;
  std::vector<uint32_t> draft_stop_;
  bool verified_ = false;  // the last step was a verification round
  size_t drafted_ = 0, accepted_ = 0;
  double seconds_ = 0;
};

}  // namespace deltafin
