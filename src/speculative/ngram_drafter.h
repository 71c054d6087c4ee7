// Prompt lookup / n-gram drafting (k3-model.md §10.1): find the most recent
// earlier occurrence of the history's last n tokens (n = 6 down to 2, longest
// first) and propose what followed it. Free to run, and strong wherever the
// output repeats its input: code edits, quoting, lists, structured text.
//
// An index of every n-gram's latest end position makes a proposal O(1) in the
// history's length (a 1M-token context must not be rescanned per token); the
// index only ever grows, as the history does.
#pragma once

#include <unordered_map>

#include "speculative/drafter.h"

namespace deltafin {

class NgramDrafter : public Drafter {
public:
  static constexpr int kMaxN = 6, kMinN = 2;
  std::string name() const override { return "ngram"; }
  std::vector<uint32_t> propose(std::span<const uint32_t> history, int k) override;

private:
  // Adds the n-grams ending at positions indexed_ .. end-1 (exclusive ends).
  void index_up_to(std::span<const uint32_t> history, size_t end);
  static uint64_t gram_hash(const uint32_t* tokens, int n);

  size_t indexed_ = 0;  // n-grams with exclusive end <= indexed_ are in the maps
  std::unordered_map<uint64_t, size_t> last_end_[kMaxN + 1];  // [n]: hash -> latest exclusive end
};

}  // namespace deltafin
