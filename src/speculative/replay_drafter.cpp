#include "speculative/replay_drafter.h"

#include <algorithm>

namespace deltafin {

std::vector<uint32_t> ReplayDrafter::propose(std::span<const uint32_t> history, int k) {
  if (history.size() > expected_.size()) return {};
  // Only the part of the history not seen before is compared: O(new tokens).
  for (; checked_ < history.size(); ++checked_)
    if (history[checked_] != expected_[checked_]) return {};
  const size_t at = history.size();
  const size_t take = std::min(static_cast<size_t>(std::max(k, 0)), expected_.size() - at);
  return std::vector<uint32_t>(expected_.begin() + at, expected_.begin() + at + take);
}

}  // namespace deltafin
