// libFuzzer target: a Hugging Face tokenizer.json (tokenizer/hf_tokenizer.h):
// its loader, which refuses every feature it does not implement, the Split
// regexes it compiles (an untrusted pattern, through the Rust-syntax
// translator and PCRE2), and the tokenizer it builds.
//
// The input bytes are `<tokenizer.json> NUL <text>` (JSON holds no raw NUL;
// without one the text is empty). Promises:
//  - HfTokenizer::parse either accepts or throws deltafin::Error naming the
//    file;
//  - for an accepted tokenizer and a UTF-8 text, encode (with and without
//    added tokens) gives ids below vocab_size() that decode without error;
//    without added tokens decode(encode(text)) is the text, normalised (NFC)
//    when the tokenizer says so, so exactly the text for an NFC text (byte-level
//    BPE loses nothing); text that is not UTF-8 is refused with an Error.
// Any other exception, crash, sanitizer report or a match that runs past
// libFuzzer's -timeout (a pattern whose matching explodes) is a bug.
//
// Run with scripts/fuzz.sh; the seed corpus is fuzz/corpus/hf_tokenizer/, the
// dictionary fuzz/hf_tokenizer.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/nfc.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

using deltafin::HfTokenizer;

const std::string kSource = "fuzz/tokenizer.json";

[[noreturn]] void bad(const std::string& what) {
  std::fprintf(stderr, "tokenizer.json tokenizer breaks its contract: %s\n", what.c_str());
  std::abort();
}

void check_ids(const HfTokenizer& t, const std::vector<uint32_t>& ids, const char* how) {
  for (uint32_t id : ids)
    if (id >= t.vocab_size()) bad(std::string(how) + " gave id " + std::to_string(id) + " past vocab_size()");
}

void check_encoding(const HfTokenizer& t, std::string_view text) {
  if (deltafin::utf8_invalid_offset(text) != deltafin::kUtf8Valid) {
    try {
      (void)t.encode(text, false);
      bad("text that is not UTF-8 was encoded");
    } catch (const deltafin::Error&) {
    }
    return;
  }
  const std::vector<uint32_t> plain = t.encode(text, false);
  check_ids(t, plain, "encode(text, false)");
  const std::string back = t.decode(plain);
  const std::string nfc = deltafin::nfc_normalize(text);
  if (back != text && back != nfc) bad("decode(encode(text, false)) is neither the text nor its NFC form");
  if (nfc == text && back != text) bad("decode(encode(text, false)) != text for an NFC text");
  const std::vector<uint32_t> special = t.encode(text, true);
  check_ids(t, special, "encode(text, true)");
  (void)t.decode(special);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view json = in.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  std::optional<HfTokenizer> t;
  try {
    t.emplace(HfTokenizer::parse(json, kSource));
  } catch (const deltafin::Error& e) {
    if (std::string_view(e.what()).find(kSource) == std::string_view::npos)
      bad(std::string("error does not name the file: ") + e.what());
    return 0;
  }
  check_encoding(*t, text);
  return 0;
}
