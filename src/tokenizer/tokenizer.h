// The tiktoken-compatible tokenizer of K3-architecture models (k3-model.md §8):
// long-input guards, the pre-tokenizer regex, byte-pair merges by rank, special
// tokens recognised only where the caller asks (control segments, §9.1), and
// decoding with U+FFFD for invalid UTF-8.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "format/tokenizer_config.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_matcher.h"

namespace deltafin {

class Tokenizer {
public:
  // Reads <model_dir>/tiktoken.model and <model_dir>/tokenizer_config.json:
  // the K3 pattern, ranks from the file, the 256 reserved ids after them.
  static Tokenizer load(const std::string& model_dir);

  // K3 layout from parts: `ranks[r]` is the token of rank r (validated like a
  // rank file), `specials` the reserved tokens at ranks.size() (validated).
  static Tokenizer from_parts(std::vector<std::string> ranks, const SpecialTokens& specials,
                              const std::string& pattern = kK3Pattern);

  // Any tiktoken encoding (used against the tiktoken oracle with cl100k_base
  // and o200k_base): specials as (spelling, id) pairs with ids not below
  // ranks.size(). Such a tokenizer has no bos/eos/pad ids.
  static Tokenizer from_parts(std::vector<std::string> ranks,
                              const std::vector<std::pair<std::string, uint32_t>>& specials,
                              const std::string& pattern);

  // Text -> ids with no special tokens: a special spelling in `text` is
  // encoded as ordinary text. `text` must be valid UTF-8 (else an Error naming
  // the byte offset).
  std::vector<uint32_t> encode_ordinary(std::string_view text) const;

  // Text -> ids, turning special spellings into their ids: find the earliest
  // spelling, encode the text before it as ordinary text, emit the id,
  // continue after it. Only for trusted, renderer-produced control text.
  std::vector<uint32_t> encode_with_specials(std::string_view text) const;

  // Ids -> text: token bytes concatenated (a special id gives its spelling),
  // invalid UTF-8 replaced by U+FFFD per maximal subpart. Throws on an
  // unknown id.
  std::string decode(const std::vector<uint32_t>& ids) const;
  // The concatenated bytes, without the UTF-8 repair.
  std::string decode_bytes(const std::vector<uint32_t>& ids) const;

  // Bytes of one token (a special id gives its spelling). Throws on an
  // unknown id.
  const std::string& token_bytes(uint32_t id) const;

  uint32_t vocab_size() const { return vocab_size_; }
  uint32_t num_ranks() const { return static_cast<uint32_t>(ranks_.size()); }
  bool is_special(uint32_t id) const { return special_bytes_.count(id) != 0; }

  // Id of a special spelling; special_id throws if there is none.
  std::optional<uint32_t> find_special(std::string_view spelling) const;
  uint32_t special_id(std::string_view spelling) const;

  // The K3 reserved-token ids: bos = base+0 ([BOS]), eos = base+2
  // (<|end_of_msg|>, where generation stops), pad = base+255 ([PAD]). Throw
  // for a tokenizer built without the K3 layout.
  uint32_t bos_id() const;
  uint32_t eos_id() const;
  uint32_t pad_id() const;

  const Pretokenizer& pretokenizer() const { return pretokenizer_; }
  const RankTable& ranks() const { return ranks_; }

private:
  Tokenizer(std::vector<std::string> ranks, const std::vector<std::pair<std::string, uint32_t>>& specials,
            const std::string& pattern);
  // Ordinary encoding of one guard slice (or part of one).
  void encode_slice(std::string_view text, std::vector<uint32_t>& out) const;
  const SpecialTokens& k3_specials(const char* what) const;

  RankTable ranks_;
  Pretokenizer pretokenizer_;
  SpecialMatcher special_matcher_;
  std::unordered_map<uint32_t, std::string> special_bytes_;  // id -> spelling
  std::unordered_map<std::string, uint32_t> special_ids_;    // spelling -> id
  std::optional<SpecialTokens> k3_;                          // set for the K3 layout
  uint32_t vocab_size_ = 0;
};

}  // namespace deltafin
