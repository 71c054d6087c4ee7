#include "speculative/draft_controller.h"

#include <algorithm>

namespace deltafin {

namespace {
constexpr double kTimeAlpha = 0.3;   // weight of the newest timing in the moving average
constexpr double kDecay = 0.95;      // acceptance counts forget old rounds, so the rate follows the text
constexpr int kProbeK = 2;           // k of the first rounds and of probes while off
constexpr int kProbeEvery = 16;      // steps between probes while drafting is off
constexpr int kGrowStep = 2;         // k grows by this after a round that accepted everything
}  // namespace

DraftController::DraftController(int max_k, int fixed_k)
    : max_k_(std::clamp(max_k, 1, kMaxDraft)), fixed_k_(std::clamp(fixed_k, 0, kMaxDraft)) {}

double DraftController::expected_tokens(int k) const {
  double e = 1.0, run = 1.0;
  for (int i = 1; i <= k; ++i) {
    // Rate with a weak prior of one half, so an unseen position is neither trusted nor ruled out.
    const double p = (right_[i] + 0.5) / (tried_[i] + 1.0);
    run *= p;
    e += run;
  }
  return e;
}

double DraftController::cost(int k) const {
  const int T = k + 1;
  if (seconds_[T] > 0) return seconds_[T];
  // Linear in the pass width through the nearest measured widths on each side
  // (or the two nearest on one side); with one point, assume each extra row
  // costs a third of a plain step (a guess the first probe replaces).
  int lo = 0, hi = 0;
  for (int t = T - 1; t >= 1 && !lo; --t)
    if (seconds_[t] > 0) lo = t;
  for (int t = T + 1; t <= kMaxDraft + 1 && !hi; ++t)
    if (seconds_[t] > 0) hi = t;
  if (lo && !hi)
    for (int t = lo - 1; t >= 1 && !hi; --t)
      if (seconds_[t] > 0) hi = lo, lo = t;
  if (hi && !lo)
    for (int t = hi + 1; t <= kMaxDraft + 1 && !lo; ++t)
      if (seconds_[t] > 0) lo = hi, hi = t;
  if (lo && hi && lo != hi) {
    const double slope = (seconds_[hi] - seconds_[lo]) / (hi - lo);
    return std::max(seconds_[lo] + slope * (T - lo), 1e-9);
  }
  const int one = lo ? lo : hi;
  if (one) return seconds_[one] * (1.0 + (T - one) / 3.0) / (1.0 + (one - 1) / 3.0);
  return 1.0 + k / 3.0;
}

int DraftController::best_k() const {
  int best = 0;
  double best_rate = expected_tokens(0) / cost(0);
  for (int k = 1; k <= max_k_; ++k) {
    const double rate = expected_tokens(k) / cost(k);
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

int DraftController::next_k() {
  if (fixed_k_ > 0) return fixed_k_;
  int k;
  if (rounds_ == 0) {
    k = kProbeK;
  } else if (seconds_[1] <= 0) {
    return last_k_ = 0;  // one plain step, so rounds are compared with a measured plain cost (growth waits)
  } else if (grow_ && round_k_ < max_k_ &&
             expected_tokens(round_k_) / cost(round_k_) > expected_tokens(0) / cost(0)) {
    k = round_k_ + kGrowStep;  // everything accepted and drafting pays: try longer drafts
  } else {
    k = best_k();
    if (k == 0 && ++steps_since_probe_ >= kProbeEvery) k = std::min(kProbeK, max_k_);
  }
  grow_ = false;
  if (k > 0) steps_since_probe_ = 0;
  return last_k_ = std::min(k, max_k_);
}

void DraftController::record_plain(double seconds) {
  double& s = seconds_[1];
  s = s > 0 ? s + kTimeAlpha * (seconds - s) : seconds;
}

void DraftController::record_round(int drafted, int accepted, double seconds) {
  drafted = std::clamp(drafted, 1, kMaxDraft);
  accepted = std::clamp(accepted, 0, drafted);
  ++rounds_;
  double& s = seconds_[drafted + 1];
  s = s > 0 ? s + kTimeAlpha * (seconds - s) : seconds;
  for (int i = 1; i <= kMaxDraft; ++i) tried_[i] *= kDecay, right_[i] *= kDecay;
  // Position i was tested only if drafts 1..i-1 were right.
  for (int i = 1; i <= std::min(accepted + 1, drafted); ++i) {
    tried_[i] += 1.0;
    if (i <= accepted) right_[i] += 1.0;
  }
  grow_ = accepted == drafted && drafted == last_k_;  // a full draft of the asked length, all right
  round_k_ = drafted;
}

}  // namespace deltafin
