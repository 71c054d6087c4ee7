// The oracle drafter of the benchmark: replays the tokens a previous plain run
// emitted for the same prompt, so every draft is right while the output stays
// the same. It bounds what any drafter can gain. If the history leaves the
// recording (a different prompt, or an output that differs), it proposes
// nothing rather than guess.
#pragma once

#include "speculative/drafter.h"

namespace deltafin {

class ReplayDrafter : public Drafter {
public:
  // `expected`: the full token stream the run will see, prompt then output.
  explicit ReplayDrafter(std::vector<uint32_t> expected) : expected_(std::move(expected)) {}
  std::string name() const override { return "replay"; }
  std::vector<uint32_t> propose(std::span<const uint32_t> history, int k) override;

private:
  std::vector<uint32_t> expected_;
  size_t checked_ = 0;  // history[0, checked_) is known to equal expected_
};

}  // namespace deltafin
