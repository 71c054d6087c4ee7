#include "tokenizer/bpe_trainer.h"

#include <cstdint>
#include <map>
#include <unordered_map>

#include "tokenizer/pretokenizer.h"
#include "util/error.h"

namespace deltafin {

namespace {

// A distinct piece of the corpus as its current token sequence, with the
// number of times the piece occurs.
struct Word {
  std::vector<uint32_t> tokens;
  uint64_t count;
};

}  // namespace

std::vector<std::string> train_bpe(std::string_view corpus, size_t n_merges, const Pretokenizer& pretokenizer) {
  return train_bpe_pieces(pretokenizer.split(corpus), n_merges);
}

std::vector<std::string> train_bpe_pieces(const std::vector<std::string_view>& pieces, size_t n_merges) {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  std::unordered_map<std::string, uint32_t> rank_of;
  for (uint32_t r = 0; r < vocab.size(); ++r) rank_of.emplace(vocab[r], r);

  // Distinct pieces in first-seen order, so training never depends on hash
  // iteration order.
  std::vector<Word> words;
  {
    std::unordered_map<std::string_view, size_t> index;
    for (std::string_view piece : pieces) {
      auto [it, inserted] = index.emplace(piece, words.size());
      if (inserted) {
        Word w{{}, 0};
        for (char c : piece) w.tokens.push_back(static_cast<unsigned char>(c));
        words.push_back(std::move(w));
      }
      ++words[it->second].count;
    }
  }

  size_t added = 0;
  while (added < n_merges) {
    // Pair frequencies; std::map keeps pairs ordered by (left, right), so the
    // first pair with the highest count is the lowest-rank pair among ties.
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> counts;
    for (const Word& w : words)
      for (size_t i = 0; i + 1 < w.tokens.size(); ++i) counts[{w.tokens[i], w.tokens[i + 1]}] += w.count;
    if (counts.empty())
      fail("BPE training: the corpus supports only ", added, " merges, ", n_merges, " were asked for");
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it)
      if (it->second > best->second) best = it;
    auto [left, right] = best->first;

    std::string merged = vocab[left] + vocab[right];
    uint32_t merged_rank;
    auto existing = rank_of.find(merged);
    if (existing != rank_of.end()) {
      merged_rank = existing->second;
    } else {
      merged_rank = static_cast<uint32_t>(vocab.size());
      vocab.push_back(merged);
      rank_of.emplace(merged, merged_rank);
      ++added;
    }
    // Replace non-overlapping occurrences left to right (for "a a a" with
    // pair (a, a) that is [aa, a], as encoding would merge it).
    for (Word& w : words) {
      std::vector<uint32_t> next;
      next.reserve(w.tokens.size());
      for (size_t i = 0; i < w.tokens.size(); ++i) {
        if (i + 1 < w.tokens.size() && w.tokens[i] == left && w.tokens[i + 1] == right) {
          next.push_back(merged_rank);
          ++i;
        } else {
          next.push_back(w.tokens[i]);
        }
      }
      w.tokens = std::move(next);
    }
  }
  return vocab;
}

}  // namespace deltafin
