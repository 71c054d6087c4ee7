// Chooses, before each step, how many tokens to draft (0 = a plain one-token
// step), from what it has measured in this request:
//   - the acceptance rate at each draft position i (the chance that draft i is
//     right when drafts 1..i-1 were), so E(k) = 1 + sum_j prod_{i<=j} p_i is
//     the expected number of tokens a k-draft round emits;
//   - the seconds a round of k drafts costs (drafting + a (k+1)-row pass),
//     per k, as a moving average; unmeasured k are interpolated linearly in
//     the pass width from the measured ones.
// It picks the k with the most expected tokens per second, E(k) / cost(k),
// k = 0 included, so drafting switches itself off when it does not pay.
// Exploration keeps the estimates honest: the first round probes k = 2, the
// next step is a plain one (so rounds are compared with a measured plain
// step), a round that accepted every draft while drafting pays tries two more
// next time, and while drafting is off a probe round runs every 16 steps. None of this can change
// the output: the verifier decides every token.
#pragma once

#include <array>
#include <cstdint>

namespace deltafin {

class DraftController {
public:
  static constexpr int kMaxDraft = 7;
  // fixed_k > 0: always draft exactly that many (benchmarks); 0: adapt.
  explicit DraftController(int max_k = kMaxDraft, int fixed_k = 0);

  int next_k();
  void record_plain(double seconds);
  // A round that drafted `drafted` (>= 1) tokens, `accepted` of them right.
  void record_round(int drafted, int accepted, double seconds);

  double expected_tokens(int k) const;  // E(k)
  double cost(int k) const;             // estimated seconds of a k-draft round (k = 0: plain step)
  int best_k() const;                   // argmax E(k)/cost(k), before exploration

private:
  int max_k_, fixed_k_;
  int last_k_ = 0;   // what next_k() returned last
  int round_k_ = 0;  // drafts in the last round
  bool grow_ = false;     // the last round accepted everything: try one more
  int steps_since_probe_ = 0;
  int rounds_ = 0;
  std::array<double, kMaxDraft + 1> tried_{}, right_{};   // [i]: decayed counts for draft position i
  std::array<double, kMaxDraft + 2> seconds_{};           // [T]: moving average of a T-row step, 0 = unmeasured
};

}  // namespace deltafin
