// Streaming decode: multi-byte characters split across tokens are held back
// until complete, and the streamed text always equals the whole-sequence
// decode.
#include "tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/tokenizer_config.h"
#include "tokenizer/token_text.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {
namespace {

const std::string kFffd = "\xef\xbf\xbd";

// Bytes 0..255, then 256 = A9 E2 (the end of "é" and the start of "€"),
// 257 = 82 AC (the rest of "€").
const Tokenizer& byte_tiktoken() {
  static const Tokenizer t = [] {
    std::vector<std::string> ranks;
    for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
    ranks.push_back("\xa9\xe2");
    ranks.push_back("\x82\xac");
    return Tokenizer::from_parts(ranks, k3_special_tokens(258));
  }();
  return t;
}

const TokenText& byte_tokenizer() {
  static const std::unique_ptr<TokenText> text = token_text(byte_tiktoken());
  return *text;
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  StreamDecoder d(byte_tokenizer());
  EXPECT_EQ(d.push('a'), "a");
  EXPECT_EQ(d.push(0xc3), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.push(0xa9), "\xc3\xa9");  // é
  EXPECT_EQ(d.push(0xf0), "");
  EXPECT_EQ(d.push(0x9f), "");
  EXPECT_EQ(d.push(0x98), "");
  EXPECT_EQ(d.push(0x80), "\xf0\x9f\x98\x80");  // 😀
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDecoder, TokenEndingOneCharacterAndStartingAnother) {
  StreamDecoder d(byte_tokenizer());
  EXPECT_EQ(d.push(0xc3), "");
  EXPECT_EQ(d.push(256), "\xc3\xa9");  // é complete, E2 held back
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.push(257), "\xe2\x82\xac");  // €
  EXPECT_EQ(d.push(259), "[EOS]");         // a special gives its spelling
}

TEST(StreamDecoder, InvalidBytesAndDanglingFragments) {
  StreamDecoder d(byte_tokenizer());
  EXPECT_EQ(d.push(0xff), kFffd);         // can never become valid: out at once
  EXPECT_EQ(d.push(0xe2), "");
  EXPECT_EQ(d.push('x'), kFffd + "x");   // E2 followed by x: E2 alone is replaced
  EXPECT_EQ(d.push(0xe2), "");
  EXPECT_EQ(d.push(0x82), "");
  EXPECT_EQ(d.flush(), kFffd);            // one U+FFFD for the unfinished E2 82
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.push('y'), "y");           // usable after flush
}

TEST(StreamDecoder, StreamedTextEqualsWholeDecode) {
  // Random byte-token sequences biased toward UTF-8 structure.
  const uint32_t pool[] = {'a', ' ', 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80,
                           0xed, 0xa0, 0xc0, 0xff, 0xf4, 0x90, 256, 257, 258};
  uint64_t state = 7;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint32_t> ids;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    size_t n = (state >> 33) % 12;
    for (size_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      ids.push_back(pool[(state >> 33) % std::size(pool)]);
    }
    StreamDecoder d(byte_tokenizer());
    std::string streamed;
    for (uint32_t id : ids) streamed += d.push(id);
    streamed += d.flush();
    ASSERT_EQ(streamed, byte_tiktoken().decode(ids)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace deltafin
