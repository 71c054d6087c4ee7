#include "speculative/ngram_drafter.h"

#include <algorithm>
#include <cstring>

namespace deltafin {

uint64_t NgramDrafter::gram_hash(const uint32_t* t, int n) {
  // FNV-1a over the ids; a collision is harmless: matches are compared in full.
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(n);
  for (int i = 0; i < n; ++i) h = (h ^ t[i]) * 1099511628211ull;
  return h;
}

void NgramDrafter::index_up_to(std::span<const uint32_t> history, size_t end) {
  for (size_t e = indexed_ + 1; e <= end; ++e)
    for (int n = kMinN; n <= kMaxN && static_cast<size_t>(n) <= e; ++n)
      last_end_[n][gram_hash(history.data() + e - n, n)] = e;
  indexed_ = std::max(indexed_, end);
}

std::vector<uint32_t> NgramDrafter::propose(std::span<const uint32_t> history, int k) {
  const size_t len = history.size();
  if (k <= 0 || len < static_cast<size_t>(kMinN) + 1) return {};
  // Index every n-gram that ends before the current suffix's end, so the
  // lookup below finds an earlier occurrence, never the suffix itself.
  if (len - 1 > indexed_) index_up_to(history, len - 1);
  for (int n = std::min<int>(kMaxN, static_cast<int>(len) - 1); n >= kMinN; --n) {
    const uint32_t* suffix = history.data() + len - n;
    auto it = last_end_[n].find(gram_hash(suffix, n));
    if (it == last_end_[n].end()) continue;
    const size_t e = it->second;
    if (std::memcmp(history.data() + e - n, suffix, n * sizeof(uint32_t)) != 0) continue;  // hash collision
    const size_t take = std::min(static_cast<size_t>(k), len - e);
    return std::vector<uint32_t>(history.begin() + e, history.begin() + e + take);
  }
  return {};
}

}  // namespace deltafin
