// Byte-pair encoding of one pre-tokenised piece, as tiktoken does it
// (k3-model.md §8.3): look the whole piece up first; otherwise start from
// single bytes and repeatedly merge the adjacent pair whose concatenation has
// the lowest rank, the leftmost such pair on ties, until no adjacent pair is a
// token.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin {

inline constexpr uint32_t kNoRank = 0xffffffffu;

// Token bytes -> rank (= token id), plus the reverse. An open-addressing
// hash table over the rank-indexed token list; lookups take a string_view so
// no key is ever copied.
class RankTable {
public:
  RankTable() = default;
  // `tokens[r]` is the token of rank r. The caller validates the list
  // (validate_rank_tokens); the table only requires distinct tokens.
  explicit RankTable(std::vector<std::string> tokens);

  uint32_t find(std::string_view bytes) const;  // rank, or kNoRank
  const std::string& bytes(uint32_t rank) const { return tokens_[rank]; }
  size_t size() const { return tokens_.size(); }
  const std::vector<std::string>& tokens() const { return tokens_; }

private:
  std::vector<std::string> tokens_;
  std::vector<uint32_t> slots_;  // rank or kNoRank; size is a power of two
  size_t mask_ = 0;
};

// Appends the ids of `piece` (non-empty; every single byte must have a rank).
// Whole-piece lookup, then the merge below; short pieces use the plain
// tiktoken loop, long ones a heap, which gives the same merges in
// O(n log n) instead of O(n^2).
void bpe_encode(std::string_view piece, const RankTable& ranks, std::vector<uint32_t>& out);

// The two merge strategies, exposed so tests can check they agree. Both
// return the ranks of the final parts, left to right, and skip the
// whole-piece lookup.
std::vector<uint32_t> bpe_merge_simple(std::string_view piece, const RankTable& ranks);
std::vector<uint32_t> bpe_merge_heap(std::string_view piece, const RankTable& ranks);

// The heap merge with the merge priority given by the caller:
// pair_rank(left, right) is the rank of joining the adjacent parts `left` and
// `right` (kNoRank: they never join); lowest rank first, leftmost on ties.
// Hugging Face BPE (tokenizers' Word::merge_all) ranks the pair in its merges
// list rather than the joined token; `ranks` must hold every single byte and
// every join the caller allows. Returns the ids (ranks) of the final parts.
std::vector<uint32_t> bpe_merge_heap_pairs(
    std::string_view piece, const RankTable& ranks,
    const std::function<uint32_t(std::string_view left, std::string_view right)>& pair_rank);

}  // namespace deltafin
