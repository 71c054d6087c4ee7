#include "tokenizer/tokenizer.h"

#include "format/tiktoken_file.h"
#include "tokenizer/input_guard.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace deltafin {

Tokenizer::Tokenizer(std::vector<std::string> ranks, const std::vector<std::pair<std::string, uint32_t>>& specials,
                     const std::string& pattern)
    : ranks_(std::move(ranks)), pretokenizer_(pattern), special_matcher_(specials) {
  uint64_t vocab = ranks_.size();
  for (const auto& [spelling, id] : specials) {
    if (id < ranks_.size())
      fail("special token \"", spelling, "\" has id ", id, ", which is a rank id (there are ", ranks_.size(),
           " ranks)");
    require_valid_utf8(spelling, cat("special token spelling for id ", id));
    if (!special_bytes_.emplace(id, spelling).second) fail("special id ", id, " is given twice");
    special_ids_.emplace(spelling, id);  // distinct spellings: SpecialMatcher checked
    vocab = std::max<uint64_t>(vocab, uint64_t{id} + 1);
  }
  vocab_size_ = static_cast<uint32_t>(vocab);
}

Tokenizer Tokenizer::load(const std::string& model_dir) {
  std::vector<std::string> ranks = read_tiktoken_file(model_dir + "/tiktoken.model");
  SpecialTokens specials =
      read_tokenizer_config(model_dir + "/tokenizer_config.json", static_cast<uint32_t>(ranks.size()));
  return from_parts(std::move(ranks), specials, kK3Pattern);
}

Tokenizer Tokenizer::from_parts(std::vector<std::string> ranks, const SpecialTokens& specials,
                                const std::string& pattern) {
  validate_rank_tokens(ranks, "tokenizer ranks");
  if (specials.base != ranks.size())
    fail("tokenizer: reserved tokens start at id ", specials.base, " but there are ", ranks.size(),
         " ranks (they must start right after the last rank)");
  validate_special_tokens(specials, "tokenizer reserved tokens");
  std::vector<std::pair<std::string, uint32_t>> pairs;
  for (uint32_t i = 0; i < kReservedTokenCount; ++i) pairs.emplace_back(specials.spellings[i], specials.base + i);
  Tokenizer t(std::move(ranks), pairs, pattern);
  t.k3_ = specials;
  return t;
}

Tokenizer Tokenizer::from_parts(std::vector<std::string> ranks,
                                const std::vector<std::pair<std::string, uint32_t>>& specials,
                                const std::string& pattern) {
  validate_rank_tokens(ranks, "tokenizer ranks");
  return Tokenizer(std::move(ranks), specials, pattern);
}

void Tokenizer::encode_slice(std::string_view text, std::vector<uint32_t>& out) const {
  for (std::string_view piece : pretokenizer_.split(text)) bpe_encode(piece, ranks_, out);
}

std::vector<uint32_t> Tokenizer::encode_ordinary(std::string_view text) const {
  require_valid_utf8(text, "text to encode");
  std::vector<uint32_t> out;
  for (std::string_view slice : split_long_input(text)) encode_slice(slice, out);
  return out;
}

std::vector<uint32_t> Tokenizer::encode_with_specials(std::string_view text) const {
  require_valid_utf8(text, "text to encode");
  std::vector<uint32_t> out;
  // The guards cut first and specials are found within each slice, as Kimi's
  // encode does (a spelling cut by a guard boundary is not recognised).
  for (std::string_view slice : split_long_input(text)) {
    size_t pos = 0;
    SpecialMatcher::Match m;
    while (special_matcher_.find(slice, pos, &m)) {
      encode_slice(slice.substr(pos, m.start - pos), out);
      out.push_back(m.id);
      pos = m.start + m.length;
    }
    encode_slice(slice.substr(pos), out);
  }
  return out;
}

const std::string& Tokenizer::token_bytes(uint32_t id) const {
  if (id < ranks_.size()) return ranks_.bytes(id);
  auto it = special_bytes_.find(id);
  if (it == special_bytes_.end())
    fail("token id ", id, " is not in the vocabulary (", ranks_.size(), " ranks, vocab size ", vocab_size_, ")");
  return it->second;
}

std::string Tokenizer::decode_bytes(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (uint32_t id : ids) out += token_bytes(id);
  return out;
}

std::string Tokenizer::decode(const std::vector<uint32_t>& ids) const { return utf8_replace_invalid(decode_bytes(ids)); }

std::optional<uint32_t> Tokenizer::find_special(std::string_view spelling) const {
  auto it = special_ids_.find(std::string(spelling));
  if (it == special_ids_.end()) return std::nullopt;
  return it->second;
}

uint32_t Tokenizer::special_id(std::string_view spelling) const {
  std::optional<uint32_t> id = find_special(spelling);
  if (!id) fail("tokenizer has no special token spelled \"", spelling, "\"");
  return *id;
}

const SpecialTokens& Tokenizer::k3_specials(const char* what) const {
  if (!k3_) fail("tokenizer has no ", what, " id: it was built without the K3 reserved-token layout");
  return *k3_;
}

uint32_t Tokenizer::bos_id() const { return k3_specials("bos").bos_id(); }
uint32_t Tokenizer::eos_id() const { return k3_specials("eos").eos_id(); }
uint32_t Tokenizer::pad_id() const { return k3_specials("pad").pad_id(); }

}  // namespace deltafin
