// Special (reserved) tokens of a K3-architecture tokenizer, read from
// `tokenizer_config.json` (k3-model.md §8.1, §14). The 256 reserved ids follow
// the tiktoken ranks: base..base+255 with base = number of ranks (K3: 163584).
// Each has the default spelling `<|reserved_token_{id}|>` unless
// `added_tokens_decoder[id].content` overrides it; a fixed set of offsets must
// carry K3's spellings, so small checkpoints use K3's layout shifted to their
// own base.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin {

inline constexpr uint32_t kReservedTokenCount = 256;

// Offsets from the base id of the reserved tokens the runtime relies on.
namespace reserved {
inline constexpr uint32_t kBos = 0;           // [BOS]
inline constexpr uint32_t kEosText = 1;       // [EOS] (not the model's stop token, see kEndOfMsg)
inline constexpr uint32_t kEndOfMsg = 2;      // <|end_of_msg|>: the model's EOS, generation stops here (§9.5)
inline constexpr uint32_t kOpen = 3;          // <|open|>
inline constexpr uint32_t kClose = 4;         // <|close|>
inline constexpr uint32_t kSep = 5;           // <|sep|>
inline constexpr uint32_t kStartHeader = 6;   // [start_header_id]
inline constexpr uint32_t kEndHeader = 7;     // [end_header_id]
inline constexpr uint32_t kEot = 9;           // [EOT]
inline constexpr uint32_t kMediaBegin = 18;   // <|media_begin|>
inline constexpr uint32_t kMediaContent = 19; // <|media_content|>
inline constexpr uint32_t kMediaEnd = 20;     // <|media_end|>
inline constexpr uint32_t kMediaPad = 21;     // <|media_pad|>
inline constexpr uint32_t kOsagentMode = 65;  // <osagent_mode>
inline constexpr uint32_t kMask = 253;        // DSpark mask token, used by id only (default spelling)
inline constexpr uint32_t kUnk = 254;         // [UNK]
inline constexpr uint32_t kPad = 255;         // [PAD]
}  // namespace reserved

struct RequiredSpecial {
  uint32_t offset;
  const char* spelling;
};

// The offsets that must carry a fixed spelling, in offset order.
const std::vector<RequiredSpecial>& required_specials();

// `<|reserved_token_{id}|>`.
std::string default_reserved_spelling(uint32_t id);

struct SpecialTokens {
  uint32_t base = 0;                   // first reserved id = number of tiktoken ranks
  std::vector<std::string> spellings;  // kReservedTokenCount entries; spellings[i] is id base + i

  uint32_t id(uint32_t offset) const { return base + offset; }
  uint32_t bos_id() const { return base + reserved::kBos; }
  uint32_t eos_id() const { return base + reserved::kEndOfMsg; }
  uint32_t pad_id() const { return base + reserved::kPad; }
};

// K3's layout at `base`: the required spellings at their offsets, every other
// id with its default spelling. What make_tokenizer_config_json describes.
SpecialTokens k3_special_tokens(uint32_t base);

// Checks a reserved-token table: 256 entries, every spelling non-empty ASCII,
// unique, none a prefix of another, the required spellings at their offsets.
// `source` names the origin in error messages.
void validate_special_tokens(const SpecialTokens& specials, const std::string& source);
// The same with another family's fixed spellings (Kimi K2's: K3's layout
// descends from it, but K2 puts its chat tokens at other offsets).
void validate_special_tokens(const SpecialTokens& specials, const std::string& source,
                             const std::vector<RequiredSpecial>& required);

// Reads the reserved-token spellings from tokenizer_config.json text; `base` is
// the number of tiktoken ranks. Fields other than added_tokens_decoder
// (bos_token, eos_token, model_max_length, ...) are informational for Hugging
// Face loaders and not read: the runtime's bos/eos/pad ids are fixed offsets.
SpecialTokens parse_tokenizer_config(std::string_view json_text, uint32_t base, const std::string& source);
SpecialTokens parse_tokenizer_config(std::string_view json_text, uint32_t base, const std::string& source,
                                     const std::vector<RequiredSpecial>& required);
SpecialTokens read_tokenizer_config(const std::string& path, uint32_t base);

// A tokenizer_config.json for a checkpoint whose rank file has `base` ranks:
// added_tokens_decoder entries for the required spellings, bos/eos/pad/unk
// token fields, model_max_length and tokenizer_class "TikTokenTokenizer".
// Reading it back with parse_tokenizer_config gives k3_special_tokens(base).
std::string make_tokenizer_config_json(uint32_t base, uint64_t model_max_length);

}  // namespace deltafin
