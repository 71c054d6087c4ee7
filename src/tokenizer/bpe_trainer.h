// Deterministic byte-level BPE training, used to build the rank files of
// generated small checkpoints (k3-model.md §14): ranks 0..255 are the single
// bytes in byte order, then each merge adds the most frequent adjacent pair
// of current tokens within the pre-tokenised pieces of the corpus.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin {

class Pretokenizer;

// Returns 256 + n_merges tokens indexed by rank (a rank file's content).
// Ties between equally frequent pairs go to the lowest (left rank, right
// rank). When the most frequent pair concatenates to bytes that are already
// a token, its occurrences become that token and no rank is added (a rank
// file cannot hold the same bytes twice), and training continues. Throws if
// the corpus runs out of pairs before n_merges new tokens exist.
std::vector<std::string> train_bpe(std::string_view corpus, size_t n_merges, const Pretokenizer& pretokenizer);

// The same on pieces already split (a chain of Hugging Face Split
// pre-tokenizers, say): merges never cross a piece boundary.
std::vector<std::string> train_bpe_pieces(const std::vector<std::string_view>& pieces, size_t n_merges);

}  // namespace deltafin
