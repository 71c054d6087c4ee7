// The Tokenizer on a hand-built vocabulary (256 bytes + 8 merges + K3's 256
// reserved ids at base 264), where every id below is worked out by hand.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/tiktoken_file.h"
#include "format/tokenizer_config.h"
#include "support/test_support.h"

namespace deltafin {
namespace {

using Ids = std::vector<uint32_t>;

// Ranks: 0..255 bytes, 256 "he", 257 "ll", 258 "llo", 259 "hello",
// 260 " w", 261 "or", 262 " wor", 263 " world". Reserved ids from 264:
// [BOS] 264, [EOS] 265, <|end_of_msg|> 266, <|open|> 267, <|close|> 268,
// <|sep|> 269, ..., [PAD] 519.
std::vector<std::string> small_ranks() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const char* m : {"he", "ll", "llo", "hello", " w", "or", " wor", " world"}) tokens.push_back(m);
  return tokens;
}

const Tokenizer& small() {
  static const Tokenizer t = Tokenizer::from_parts(small_ranks(), k3_special_tokens(264));
  return t;
}

using test::expect_error;

TEST(Tokenizer, EncodesOrdinaryText) {
  EXPECT_EQ(small().encode_ordinary("hello world"), (Ids{259, 263}));
  // "hellos": [h e l l o s] -> he -> ll -> llo -> hello -> [hello s].
  EXPECT_EQ(small().encode_ordinary("hellos"), (Ids{259, 's'}));
  // " wo": [" w" o]; " wo" is no token.
  EXPECT_EQ(small().encode_ordinary(" wo"), (Ids{260, 'o'}));
  // "Hello": H is not h, so only ll -> llo applies: [H e llo].
  EXPECT_EQ(small().encode_ordinary("Hello"), (Ids{'H', 'e', 258}));
  EXPECT_TRUE(small().encode_ordinary("").empty());
  // Multi-byte characters fall back to their bytes: é = C3 A9.
  EXPECT_EQ(small().encode_ordinary("\xc3\xa9"), (Ids{0xc3, 0xa9}));
}

TEST(Tokenizer, SpecialSpellingsAreOrdinaryTextUnlessAsked) {
  // Pieces "a" "<|" "open" "|>" "b" "[BOS" "]", each only bytes here.
  EXPECT_EQ(small().encode_ordinary("a<|open|>b[BOS]"),
            (Ids{'a', '<', '|', 'o', 'p', 'e', 'n', '|', '>', 'b', '[', 'B', 'O', 'S', ']'}));
  EXPECT_EQ(small().encode_with_specials("a<|open|>b[BOS]"), (Ids{'a', 267, 'b', 264}));
  // Text around a special is encoded on its own: "hello" before, " world" after.
  EXPECT_EQ(small().encode_with_specials("hello<|sep|> world<|end_of_msg|>"), (Ids{259, 269, 263, 266}));
  EXPECT_EQ(small().encode_with_specials("<|open|><|close|>"), (Ids{267, 268}));
  // An unfinished spelling is plain text.
  EXPECT_EQ(small().encode_with_specials("<|open|"), (Ids{'<', '|', 'o', 'p', 'e', 'n', '|'}));
}

TEST(Tokenizer, DecodesBytesAndSpecials) {
  EXPECT_EQ(small().decode({259, 263}), "hello world");
  EXPECT_EQ(small().decode({'a', 267, 'b', 264}), "a<|open|>b[BOS]");
  EXPECT_EQ(small().decode({0xc3, 0xa9}), "\xc3\xa9");
  // A lone lead byte decodes to U+FFFD; the bytes stay available raw.
  EXPECT_EQ(small().decode({0xe4, 0xb8, 'x'}), "\xef\xbf\xbdx");
  EXPECT_EQ(small().decode_bytes({0xe4, 0xb8, 'x'}), "\xe4\xb8x");
  EXPECT_EQ(small().token_bytes(262), " wor");
  EXPECT_EQ(small().token_bytes(519), "[PAD]");
  EXPECT_EQ(small().token_bytes(272), "<|reserved_token_272|>");
  expect_error([] { small().decode({520}); }, {"token id 520 is not in the vocabulary", "vocab size 520"});
}

TEST(Tokenizer, IdsAndSpecialLookup) {
  EXPECT_EQ(small().vocab_size(), 520u);
  EXPECT_EQ(small().num_ranks(), 264u);
  EXPECT_EQ(small().bos_id(), 264u);
  EXPECT_EQ(small().eos_id(), 266u);
  EXPECT_EQ(small().pad_id(), 519u);
  EXPECT_EQ(small().special_id("<|open|>"), 267u);
  EXPECT_EQ(small().special_id("[UNK]"), 518u);
  EXPECT_TRUE(small().is_special(267));
  EXPECT_FALSE(small().is_special(263));
  EXPECT_FALSE(small().find_special("<|nope|>").has_value());
  expect_error([] { small().special_id("<|nope|>"); }, {"no special token spelled \"<|nope|>\""});
}

TEST(Tokenizer, RefusesInvalidUtf8Input) {
  expect_error([] { small().encode_ordinary("ab\xff" "c"); }, {"text to encode is not valid UTF-8", "byte offset 2"});
  expect_error([] { small().encode_with_specials("\xc3"); }, {"not valid UTF-8", "byte offset 0"});
}

TEST(Tokenizer, LongInputGuardChangesIdsAsKimiDoes) {
  // Ranks: bytes, then "11" 256, "111" 257. 25,001 digits: without the guard
  // the regex would give 8,333 "111" pieces and one "11". The guard cuts the
  // run after 25,000 characters, so the first slice ends in 25,000 = 8,333 * 3
  // + 1 -> a lone "1", and the second slice is another lone "1".
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  ranks.push_back("11");
  ranks.push_back("111");
  Tokenizer t = Tokenizer::from_parts(ranks, k3_special_tokens(258));
  Ids want(8333, 257);
  want.push_back('1');
  want.push_back('1');
  EXPECT_EQ(t.encode_ordinary(std::string(25001, '1')), want);
  EXPECT_EQ(t.encode_with_specials(std::string(25001, '1')), want);
  // 25,000 digits are not cut: 8,333 "111" and a "1".
  Ids whole(8333, 257);
  whole.push_back('1');
  EXPECT_EQ(t.encode_ordinary(std::string(25000, '1')), whole);
}

TEST(Tokenizer, LoadsAModelDirectory) {
  test::TempDir dir;
  test::write_bytes(dir.file("tiktoken.model"), format_tiktoken_ranks(small_ranks()));
  test::write_bytes(dir.file("tokenizer_config.json"), make_tokenizer_config_json(264, 4096));
  Tokenizer t = Tokenizer::load(dir.path());
  EXPECT_EQ(t.encode_with_specials("hello<|sep|> world"), (Ids{259, 269, 263}));
  EXPECT_EQ(t.vocab_size(), 520u);
  EXPECT_EQ(t.eos_id(), 266u);

  test::TempDir empty;
  expect_error([&] { Tokenizer::load(empty.path()); }, {"tiktoken.model"});
  test::write_bytes(empty.file("tiktoken.model"), format_tiktoken_ranks(small_ranks()));
  expect_error([&] { Tokenizer::load(empty.path()); }, {"tokenizer_config.json"});
}

TEST(Tokenizer, FromPartsValidates) {
  std::vector<std::string> ranks = small_ranks();
  expect_error([&] { Tokenizer::from_parts(ranks, k3_special_tokens(300)); },
               {"reserved tokens start at id 300 but there are 264 ranks"});
  ranks.push_back("he");
  expect_error([&] { Tokenizer::from_parts(ranks, k3_special_tokens(265)); }, {"duplicate token"});
  expect_error([&] { Tokenizer::from_parts(small_ranks(), {{"<x>", 10}}, kK3Pattern); },
               {"special token \"<x>\" has id 10, which is a rank id"});
  // A generic tokenizer (specials with gaps) has no K3 ids.
  Tokenizer g = Tokenizer::from_parts(small_ranks(), {{"<|endoftext|>", 300}}, kK3Pattern);
  EXPECT_EQ(g.vocab_size(), 301u);
  EXPECT_EQ(g.encode_with_specials("hello<|endoftext|>"), (Ids{259, 300}));
  expect_error([&] { g.token_bytes(280); }, {"token id 280 is not in the vocabulary"});
  expect_error([&] { g.eos_id(); }, {"no eos id"});
}

}  // namespace
}  // namespace deltafin
