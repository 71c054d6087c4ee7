// Rank-file parsing (k3-model.md §8.1): good files parse to tokens by rank;
// each kind of malformed file is refused with an error naming the file, the
// line and the fault.
#include "format/tiktoken_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_support.h"

namespace deltafin {
namespace {

using test::expect_error;

// The 256 single bytes in byte order, then `extra` lines, as rank-file text.
std::string rank_file(const std::vector<std::string>& extra_b64 = {}) {
  std::string text;
  int rank = 0;
  for (int b = 0; b < 256; ++b, ++rank) text += base64_encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank) + "\n";
  for (const std::string& e : extra_b64) text += e + " " + std::to_string(rank++) + "\n";
  return text;
}

TEST(Base64, EncodesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\x00\xff\xfe", 3)), "AP/+");
}

TEST(TiktokenFile, ParsesTokensByRank) {
  // "aGVsbG8=" is "hello", "IHdvcmxk" is " world", "4pyT" is U+2713 in UTF-8.
  std::vector<std::string> tokens = parse_tiktoken_ranks(rank_file({"aGVsbG8=", "IHdvcmxk", "4pyT"}), "t.model");
  ASSERT_EQ(tokens.size(), 259u);
  EXPECT_EQ(tokens[0], std::string(1, '\0'));
  EXPECT_EQ(tokens[65], "A");
  EXPECT_EQ(tokens[255], "\xff");
  EXPECT_EQ(tokens[256], "hello");
  EXPECT_EQ(tokens[257], " world");
  EXPECT_EQ(tokens[258], "\xe2\x9c\x93");
}

TEST(TiktokenFile, AcceptsAMissingFinalNewline) {
  std::string text = rank_file({"aGk="});  // "hi"
  text.pop_back();
  EXPECT_EQ(parse_tiktoken_ranks(text, "t.model").back(), "hi");
}

TEST(TiktokenFile, ReadsFromDiskAndRoundTripsThroughFormat) {
  test::TempDir dir;
  std::vector<std::string> tokens = parse_tiktoken_ranks(rank_file({"aGVsbG8="}), "mem");
  test::write_bytes(dir.file("tiktoken.model"), format_tiktoken_ranks(tokens));
  EXPECT_EQ(read_tiktoken_file(dir.file("tiktoken.model")), tokens);
  EXPECT_EQ(format_tiktoken_ranks(tokens), rank_file({"aGVsbG8="}));
  expect_error([&] { read_tiktoken_file(dir.file("absent.model")); }, {"absent.model"});
}

TEST(TiktokenFile, RefusesBadBase64) {
  expect_error([] { parse_tiktoken_ranks(rank_file({"aGV!bG8="}), "t.model"); },
               {"t.model:257", "invalid base64 character '!'", "column 4"});
  expect_error([] { parse_tiktoken_ranks(rank_file({"aGVsbG8"}), "t.model"); },
               {"t.model:257", "not a multiple of 4"});
  // "YR==" carries non-zero bits after the 'a' it encodes.
  expect_error([] { parse_tiktoken_ranks(rank_file({"YR=="}), "t.model"); }, {"t.model:257", "non-canonical"});
  expect_error([] { parse_tiktoken_ranks(rank_file({"=aGk"}), "t.model"); }, {"t.model:257", "invalid base64"});
}

TEST(TiktokenFile, RefusesAGapOrDisorderInRanks) {
  std::string text = rank_file({"aGk="});
  text += "aGVsbG8= 258\n";  // rank 257 skipped
  expect_error([&] { parse_tiktoken_ranks(text, "t.model"); },
               {"t.model:258", "rank 258 out of order", "expected 257"});
  std::string swapped = "AQ== 1\nAA== 0\n";
  expect_error([&] { parse_tiktoken_ranks(swapped, "t.model"); }, {"t.model:1", "rank 1", "expected 0"});
}

TEST(TiktokenFile, RefusesMalformedLines) {
  expect_error([] { parse_tiktoken_ranks(rank_file() + "aGk=\n", "t.model"); }, {"t.model:257", "separated by one space"});
  expect_error([] { parse_tiktoken_ranks(rank_file() + "aGk= 256 x\n", "t.model"); }, {"t.model:257", "exactly two fields"});
  expect_error([] { parse_tiktoken_ranks(rank_file() + "aGk= +256\n", "t.model"); }, {"t.model:257", "not a decimal integer"});
  expect_error([] { parse_tiktoken_ranks(rank_file() + "aGk= 0256\n", "t.model"); }, {"t.model:257", "not a decimal integer"});
  expect_error([] { parse_tiktoken_ranks(rank_file() + "\n", "t.model"); }, {"t.model:257", "empty line"});
  expect_error([] { parse_tiktoken_ranks("AA== 0\r\n", "t.model"); }, {"t.model:1", "carriage return"});
  expect_error([] { parse_tiktoken_ranks("", "t.model"); }, {"t.model", "empty"});
}

TEST(TiktokenFile, RefusesAMissingSingleByte) {
  std::string text;
  int rank = 0;
  for (int b = 0; b < 256; ++b)
    if (b != 'A') text += base64_encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank++) + "\n";
  expect_error([&] { parse_tiktoken_ranks(text, "t.model"); }, {"t.model", "single byte 'A'", "no rank"});
  std::vector<std::string> tokens;
  for (int b = 1; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.push_back("xy");
  expect_error([&] { validate_rank_tokens(tokens, "list"); }, {"list", "single byte 0x00"});
}

TEST(TiktokenFile, RefusesADuplicateToken) {
  // "QQ==" is "A", already rank 65 on line 66.
  expect_error([] { parse_tiktoken_ranks(rank_file({"aGk=", "QQ=="}), "t.model"); },
               {"t.model:258", "duplicate token", "same bytes as line 66"});
  std::vector<std::string> tokens = parse_tiktoken_ranks(rank_file({"aGk="}), "mem");
  tokens.push_back("hi");
  expect_error([&] { validate_rank_tokens(tokens, "list"); }, {"list", "duplicate token", "ranks 256 and 257"});
  tokens.back() = "";
  expect_error([&] { validate_rank_tokens(tokens, "list"); }, {"list", "rank 257 is empty"});
}

}  // namespace
}  // namespace deltafin
