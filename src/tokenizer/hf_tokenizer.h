// A Hugging Face `tokenizer.json` byte-level BPE tokenizer, the subset that
// Qwen3 (the speculative draft model) uses, with the results of the
// `tokenizers` library:
//   added tokens   found first, in the raw text (leftmost, then longest);
//                  those marked `normalized` in the normalized sections
//   normalizer     NFC, a Sequence of NFC (empty: none), or none
//   pre_tokenizer  Split{Regex, Isolated} (any number, in order), then
//                  ByteLevel{add_prefix_space: false, use_regex: false}
//   model          BPE: vocab {byte-level string: id} and merges, ranked by
//                  position ("a b" strings or [a, b] pairs), ignore_merges;
//                  a vocab key outside the byte-level alphabet (DeepSeek V3's
//                  <｜begin▁of▁sentence｜> at id 0) is a token BPE never
//                  makes, reached only as the added token of the same id
//   decoder        ByteLevel
// Everything else a tokenizer.json may hold is refused at load with an error
// naming the file and the JSON field: a feature this class does not
// implement is never silently ignored.
//
// Split regexes are written for Oniguruma (what `tokenizers` runs); they are
// compiled through the Rust-syntax translator of pretokenizer.h. The two
// engines agree on what Qwen-style patterns use: `\s` is Unicode White_Space
// in both (unlike JavaScript's, which lacks U+0085 and adds U+FEFF), `\p{L}`,
// `\p{N}`, and `(?i:'s)` also matches "'ſ" (U+017F folds to s).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_matcher.h"

namespace deltafin {

class HfTokenizer {
public:
  // Reads and validates a tokenizer.json. Errors name the file and the field,
  // e.g. `tokenizer.json: pre_tokenizer.pretokenizers[1].type "Metaspace" is
  // not supported`.
  static HfTokenizer load(const std::string& tokenizer_json_path);
  // The same from the file's text; `source` names it in errors.
  static HfTokenizer parse(std::string_view json_text, const std::string& source);

  // Text (valid UTF-8, else an Error naming the byte offset) -> ids.
  // allow_special: added tokens (special or not) spelled in the text become
  // their ids, as `tokenizers`' encode does; false: the whole text is
  // ordinary text and an added-token spelling is tokenised like any other.
  std::vector<uint32_t> encode(std::string_view text, bool allow_special) const;

  // Ids -> the raw bytes of the tokens (an added token gives its content, as
  // the ByteLevel decoder turns it into bytes); may be partial UTF-8. Throws
  // on an id that is neither in the vocab nor an added token.
  std::string decode(std::span<const uint32_t> ids) const;

  // Max id + 1 over the vocab and the added tokens.
  size_t vocab_size() const { return vocab_size_; }

  // Id of a token as tokenizer.json spells it: an added token's content, or
  // a vocab key in the byte-level alphabet ("Ġthe" for " the").
  std::optional<uint32_t> token_id(std::string_view content) const;

  // Number of vocab (model) tokens, ids 0..n-1.
  size_t model_vocab_size() const { return vocab_.size(); }

private:
  HfTokenizer() = default;
  void encode_section(std::string_view text, bool allow_special, std::vector<uint32_t>& out) const;
  void encode_normalized(std::string_view text, std::vector<uint32_t>& out) const;
  void encode_piece(std::string_view piece, std::vector<uint32_t>& out) const;
  uint32_t merge_rank(std::string_view left, std::string_view right) const;

  struct AddedToken {
    std::string content;
    uint32_t id = 0;
    bool special = false;
    bool normalized = false;
    std::string bytes;  // what the ByteLevel decoder makes of the content
  };

  RankTable vocab_;                                   // id -> raw token bytes, ids 0..n-1
  // Vocab keys outside the byte-level alphabet (id -> key): never produced
  // by BPE, their table entries are placeholders (see parse).
  std::unordered_map<uint32_t, std::string> unreachable_;
  std::unordered_map<uint64_t, uint32_t> merges_;     // (left id << 32 | right id) -> rank
  bool ignore_merges_ = false;
  bool nfc_ = false;
  std::vector<Pretokenizer> splits_;                  // the Split regexes, in order
  std::vector<AddedToken> added_;
  std::unordered_map<uint32_t, size_t> added_by_id_;  // id -> index in added_
  std::unordered_map<std::string, size_t> added_by_content_;
  SpecialMatcher raw_matcher_;         // added tokens with normalized: false, matched in the raw text
  SpecialMatcher normalized_matcher_;  // normalized: true, matched after normalisation
  bool has_raw_ = false, has_normalized_ = false;
  size_t vocab_size_ = 0;
};

}  // namespace deltafin
