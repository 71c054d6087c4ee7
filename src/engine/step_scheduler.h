// Several requests on one model (`serve --parallel N`): every running
// request's forward passes go through one StepScheduler, which runs them
// together, a step at a time, as one batched pass over all their rows
// (CausalModel::forward_batch: each row attends only to its own session, the
// routed experts are applied once to the union of the rows' routes, so a
// streamed expert is read once per step for every request).
//
// A request keeps its own sequential code (prefill, the generation loop,
// speculation, prompt reuse: engine/speculative_generate.h) and runs it on a
// StepScheduler::Client, a CausalModel whose forward() and forward_verify()
// hand the rows to the scheduler and wait for them. Because every family's
// pass is batch invariant (a T-row pass equals T one-row passes, whatever
// rows stand beside them: design.md §5), a request's tokens and logits are
// exactly those of running it alone, whatever else runs, when, in which
// order, and however its prompt is cut into slices.
//
// The step policy, in order:
//   1. Decoding first: every waiting decode pass (a token, or a verification
//      of drafted tokens) joins the step whole.
//   2. Prefill in slices: the step's row budget (`step_rows`) left after the
//      decode rows goes to the prompts being prefilled: a quarter is the
//      oldest's (so a long prompt always advances), the rest goes to the
//      prompts with the least left first, and what they leave back to the
//      oldest. A 600k-token prompt so advances a slice per step while a chat
//      sent beside it is prefilled in a step or two and then decodes every
//      step. A row far into a long context weighs more (its attention reads
//      the whole context). While requests are decoding, the prefill slices
//      are also paced: at most as much prefill work as one decode step
//      takes (times the prompts waiting per decoding request, when more), from
//      the steps' measured times, so a decode token beside a prefill takes
//      about twice what it takes alone (a row budget alone let
//      a slow model's 256-row slice hold every decoding request for seconds
//      a token).
//   3. A verification (speculation) is its own pass in the step (its session
//      keeps what keep_verified needs), run before the batched pass.
// After a step, the scheduler waits briefly (kGatherWait) for the requests
// of the last step to hand in their next rows, so that decoding requests
// stay in one batch; a request that is slower (its client's socket) joins a
// later step. Cancellation is asked between steps: a cancelled prefill
// stops at a slice boundary, and its request rewinds to its mark.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "model/common/causal_model.h"

namespace deltafin {

// Prefill units that fit beside decoding: as many as take the decode part's
// time (decode_step_s / prefill_unit_s), times the prompts waiting per
// decoding request when there are more prompts (each request, decoding or
// prefilling, then gets about an equal share of the step), within `budget`,
// at least one; the whole budget while either time is unmeasured.
size_t prefill_budget_beside_decode(double decode_step_s, double prefill_unit_s, size_t budget, size_t prompts = 1,
                                    size_t decoders = 1);

class StepScheduler {
public:
  static constexpr std::chrono::microseconds kGatherWait{2'000};
  // Rows a step holds by default: resident, 64 (the prefill's slice); streamed,
  // 512, as a step's time is the union of its rows' experts read from the
  // drives, which a few rows more hardly grow, and a prompt cut in small
  // slices reads the bank once a slice.
  static constexpr int64_t kDefaultStepRows = 64;
  static constexpr int64_t kDefaultStreamedStepRows = 512;

  // Runs `model`'s passes on its own thread. `model_mu` is held for every
  // pass and for the model calls a Client makes outside the scheduler
  // (keep_verified, capture layers; the drafters take it too): the model's
  // scratch and the backend are not reentrant.
  // `pace`: cap the prefill beside decoding by measured time (off in the
  // policy tests, whose model takes no time).
  // `whole_alone`: a prefill with nothing else waiting runs its pass whole
  // (streamed experts: a slice re-reads the experts its rows route to).
  StepScheduler(CausalModel& model, std::mutex& model_mu, int64_t step_rows, bool pace = true, bool whole_alone = false);
  ~StepScheduler();
  StepScheduler(const StepScheduler&) = delete;
  StepScheduler& operator=(const StepScheduler&) = delete;

  class Client;
  // A request's view of the model; `order` ranks it among prefills (older
  // first). The client must not outlive the scheduler.
  std::unique_ptr<Client> client(uint64_t order);

  // What the steps were, for /health and the bench.
  struct Stats {
    int64_t steps = 0, rows = 0, parts = 0;       // batched passes, their rows and parts
    int64_t prefill_rows = 0, decode_rows = 0;
    int64_t max_parts = 0;                        // the most parts one step held
  };
  Stats stats() const;
  // Passes handed in and not yet run or finished (a prefill between its slices counts).
  size_t waiting() const;
  // Tests only: sleep this long after every step that ran prefill rows, so
  // that a test can watch a long prefill while short requests go on.
  void set_prefill_step_delay_ms(int ms);

private:
  struct Work;
  void loop();
  // Waits for work; false when stopping with none left.
  bool gather(std::unique_lock<std::mutex>& lock);
  void run_step(std::vector<Work*>& step, std::vector<size_t>& rows);
  Rows submit(Work& w, const PassShape& shape);
  void learn_pace(double seconds, bool decoding, size_t prefill_units);

  CausalModel& model_;
  std::mutex& model_mu_;
  const int64_t step_rows_;
  const bool pace_, whole_alone_;
  double decode_step_s_ = 0, prefill_unit_s_ = 0;  // the scheduler thread's
  int64_t steps_since_decode_alone_ = 0;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Work*> pending_;
  size_t last_step_parts_ = 0;  // how many passes the last step ran (the gather waits for as many)
  bool stop_ = false;
  Stats stats_;
  std::atomic<int> prefill_step_delay_ms_{0};
  std::thread thread_;
};

// A CausalModel for one request: passes go through the scheduler, the
// session-only calls go straight to the model (they touch only the
// request's own session), the rest under the model's lock.
class StepScheduler::Client final : public CausalModel {
public:
  Client(StepScheduler& s, uint64_t order) : s_(s), order_(order) {}
  const ModelSummary& summary() const override { return s_.model_.summary(); }
  std::unique_ptr<ModelSession> new_session() const override { return s_.model_.new_session(); }
  Rows forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
               const PassShape& shape = {}) override;
  std::shared_ptr<SessionMark> mark(const ModelSession& session) const override { return s_.model_.mark(session); }
  void rewind(ModelSession& session, const SessionMark& mark) const override { s_.model_.rewind(session, mark); }
  std::unique_ptr<ModelSession> copy_at(const ModelSession& session, const SessionMark& at) const override {
    return s_.model_.copy_at(session, at);
  }
  uint64_t state_values(int64_t length) const override { return s_.model_.state_values(length); }
  void for_each_state_part(const ModelSession& session, const SessionMark& at, const StatePartFn& part) const override {
    s_.model_.for_each_state_part(session, at, part);
  }
  void read_state(ModelSession& fresh, int64_t length, const StateReadFn& read) const override {
    s_.model_.read_state(fresh, length, read);
  }
  Rows forward_verify(ModelSession& session, std::span<const uint32_t> tokens) override;
  void keep_verified(ModelSession& session, size_t rows) override;
  // The routes are the whole step's, not this request's: statistics of a
  // concurrent request do not have them.
  const std::vector<std::vector<Route>>& last_routes() const override { return no_routes_; }
  void set_capture_layers(std::vector<int64_t> layers) override;
  const Rows& captured() const override { return captured_; }

private:
  friend class StepScheduler;
  StepScheduler& s_;
  const uint64_t order_;
  Rows captured_;  // this request's rows of its last pass
  const std::vector<std::vector<Route>> no_routes_;
};

}  // namespace deltafin
