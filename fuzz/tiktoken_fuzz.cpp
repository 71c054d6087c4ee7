// libFuzzer target: K3's tokenizer files, the tiktoken rank file
// (format/tiktoken_file.h) and the reserved tokens of tokenizer_config.json
// (format/tokenizer_config.h), and the tokenizer built from them
// (tokenizer/tokenizer.h).
//
// The input bytes are `<tiktoken.model> NUL <tokenizer_config.json> NUL
// <text>` (neither file can hold a NUL; missing parts are empty). Promises:
//  - each parser either accepts or throws deltafin::Error naming its file;
//  - an accepted rank file is canonical: writing the ranks back
//    (format_tiktoken_ranks) gives the same text, but for a missing final
//    newline;
//  - accepted reserved tokens pass validate_special_tokens, and a tokenizer
//    built from accepted ranks and reserved tokens is always built (from_parts
//    checks nothing the two parsers did not);
//  - for such a tokenizer and a UTF-8 text: encode_ordinary gives rank ids
//    only and encode_with_specials ids below vocab_size(), and both decode
//    back to the text exactly (the tokenizer is lossless); text that is not
//    UTF-8 is refused with an Error. Decoding arbitrary ids (the text's bytes
//    read as 16-bit ids) gives valid UTF-8 or an Error for an unknown id.
// Any other exception, crash or sanitizer report is a bug.
//
// Run with scripts/fuzz.sh; the seed corpus is fuzz/corpus/tiktoken/, the
// dictionary fuzz/tiktoken.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/tiktoken_file.h"
#include "format/tokenizer_config.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

using deltafin::SpecialTokens;
using deltafin::Tokenizer;

const std::string kRanks = "fuzz/tiktoken.model", kConfig = "fuzz/tokenizer_config.json";

[[noreturn]] void bad(const std::string& what) {
  std::fprintf(stderr, "tiktoken tokenizer breaks its contract: %s\n", what.c_str());
  std::abort();
}

// The next NUL-terminated part of `in` (all of it when there is no NUL).
std::string_view next_part(std::string_view& in) {
  const size_t nul = in.find('\0');
  const std::string_view part = in.substr(0, nul);
  in = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  return part;
}

void expect_names(const deltafin::Error& e, const std::string& file) {
  if (std::string_view(e.what()).find(file) == std::string_view::npos)
    bad("error does not name " + file + ": " + e.what());
}

std::optional<std::vector<std::string>> parse_ranks(std::string_view text) {
  std::vector<std::string> ranks;
  try {
    ranks = deltafin::parse_tiktoken_ranks(text, kRanks);
  } catch (const deltafin::Error& e) {
    expect_names(e, kRanks);
    return std::nullopt;
  }
  const std::string written = deltafin::format_tiktoken_ranks(ranks);
  if (written != text && written != std::string(text) + "\n") bad("the rank file is not canonical: it reads back other text");
  return ranks;
}

std::optional<SpecialTokens> parse_specials(std::string_view text, uint32_t base) {
  SpecialTokens specials;
  try {
    specials = deltafin::parse_tokenizer_config(text, base, kConfig);
  } catch (const deltafin::Error& e) {
    expect_names(e, kConfig);
    return std::nullopt;
  }
  if (specials.base != base) bad("reserved tokens at another base");
  try {
    deltafin::validate_special_tokens(specials, kConfig);
  } catch (const deltafin::Error& e) {
    bad(std::string("accepted reserved tokens do not validate: ") + e.what());
  }
  return specials;
}

void check_encoding(const Tokenizer& t, std::string_view text) {
  if (deltafin::utf8_invalid_offset(text) != deltafin::kUtf8Valid) {
    try {
      (void)t.encode_ordinary(text);
      bad("text that is not UTF-8 was encoded");
    } catch (const deltafin::Error&) {
    }
    return;
  }
  const std::vector<uint32_t> ordinary = t.encode_ordinary(text);
  for (uint32_t id : ordinary)
    if (id >= t.num_ranks()) bad("encode_ordinary gave a special id " + std::to_string(id));
  if (t.decode_bytes(ordinary) != text) bad("decode_bytes(encode_ordinary(text)) != text");
  if (t.decode(ordinary) != text) bad("decode(encode_ordinary(text)) != text");
  const std::vector<uint32_t> with_specials = t.encode_with_specials(text);
  for (uint32_t id : with_specials)
    if (id >= t.vocab_size()) bad("encode_with_specials gave an id past the vocabulary");
  if (t.decode_bytes(with_specials) != text) bad("decode_bytes(encode_with_specials(text)) != text");
}

void check_decoding(const Tokenizer& t, std::string_view text) {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i + 1 < text.size() && ids.size() < 64; i += 2)
    ids.push_back(static_cast<uint8_t>(text[i]) | static_cast<uint32_t>(static_cast<uint8_t>(text[i + 1])) << 8);
  try {
    const std::string decoded = t.decode(ids);
    if (deltafin::utf8_invalid_offset(decoded) != deltafin::kUtf8Valid) bad("decode gave invalid UTF-8");
  } catch (const deltafin::Error&) {
    for (uint32_t id : ids)
      if (id >= t.vocab_size()) return;
    bad("decode refused ids that are all in the vocabulary");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view rank_text = next_part(in), config_text = next_part(in), text = in;
  const std::optional<std::vector<std::string>> ranks = parse_ranks(rank_text);
  // The seeds' rank files have 512 ranks: their tokenizer_config.json still
  // reaches the parser when a mutation breaks the rank file.
  const uint32_t base = ranks ? static_cast<uint32_t>(ranks->size()) : 512;
  const std::optional<SpecialTokens> specials = parse_specials(config_text, base);
  if (!ranks || !specials) return 0;
  std::optional<Tokenizer> t;
  try {
    t.emplace(Tokenizer::from_parts(*ranks, *specials));
  } catch (const deltafin::Error& e) {
    bad(std::string("accepted files do not make a tokenizer: ") + e.what());
  }
  check_encoding(*t, text);
  check_decoding(*t, text);
  return 0;
}
