#include "engine/speculative_stepper.h"

#include <algorithm>
#include <chrono>

#include "model/common/greedy.h"
#include "engine/speculative_generate.h"
#include "util/error.h"

namespace deltafin {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

SpeculativeStepper::SpeculativeStepper(CausalModel& model, Drafter* drafter, int max_draft, int fixed_k, SpecStats* stats)
    : model_(model), drafter_(drafter), controller_(max_draft, fixed_k), verifier_(model), stats_(stats) {}

std::vector<uint32_t> SpeculativeStepper::step(ModelSession& session, std::span<const uint32_t> history, int64_t budget,
                                               std::vector<std::vector<float>>* logits) {
  if (history.empty()) fail("speculative step: empty history");
  const auto t0 = Clock::now();
  const uint32_t next = history.back();
  int k = drafter_ ? controller_.next_k() : 0;
  k = static_cast<int>(std::clamp<int64_t>(k, 0, std::max<int64_t>(budget, 0)));
  std::vector<uint32_t> drafts;
  if (k > 0) {
    drafts = drafter_->propose(history, k);
    if (drafts.size() > static_cast<size_t>(k)) drafts.resize(static_cast<size_t>(k));
    auto stop = std::find_first_of(drafts.begin(), drafts.end(), draft_stop_.begin(), draft_stop_.end());
    if (stop != drafts.end()) drafts.erase(stop + 1, drafts.end());
  }
  if (stats_) stats_->draft_seconds += since(t0);
  if (logits) logits->clear();

  std::vector<uint32_t> out;
  if (drafts.empty()) {
    const uint32_t one[1] = {next};
    Rows l = model_.forward(session, one, false);
    out.push_back(argmax_first(l.row(0), l.n));
    if (logits) logits->emplace_back(l.row(0), l.row(0) + l.n);
    verified_ = false;
  } else {
    Verification v = verifier_.run(session, next, drafts);
    out.assign(v.greedy.begin(), v.greedy.begin() + static_cast<std::ptrdiff_t>(v.accepted + 1));
    if (logits)
      for (size_t i = 0; i <= v.accepted; ++i) logits->emplace_back(v.logits.row(i), v.logits.row(i) + v.logits.n);
    verified_ = true;
    drafted_ = drafts.size();
    accepted_ = v.accepted;
  }
  seconds_ = since(t0);
  return out;
}

void SpeculativeStepper::commit(ModelSession& session, size_t handled) {
  if (handled == 0 || handled > (verified_ ? accepted_ + 1 : 1))
    fail("speculative step: cannot commit ", handled, " rows of a step that chose ", verified_ ? accepted_ + 1 : 1, " tokens");
  if (verified_) verifier_.commit(session, handled);
  if (drafter_) drafter_->committed(model_.captured(), handled);
  if (!verified_) {
    if (drafter_) controller_.record_plain(seconds_);
    if (stats_) ++stats_->plain_steps, stats_->plain_seconds += seconds_;
    return;
  }
  controller_.record_round(static_cast<int>(drafted_), static_cast<int>(accepted_), seconds_);
  if (!stats_) return;
  ++stats_->rounds;
  ++stats_->rounds_by_k[drafted_];
  stats_->drafted += static_cast<int64_t>(drafted_);
  stats_->accepted += static_cast<int64_t>(accepted_);
  stats_->round_tokens += static_cast<int64_t>(handled);
  stats_->round_seconds += seconds_;
}

}  // namespace deltafin
