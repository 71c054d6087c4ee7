// Reserved special tokens from tokenizer_config.json (k3-model.md §8.1, §14):
// the generator's file reads back as K3's layout, overrides apply, and every
// rule violation is refused with an error naming the file and the fault.
#include "format/tokenizer_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace deltafin {
namespace {

using test::expect_error;

// The generated config for base 512 with one entry changed or added.
std::string config_with(const std::string& id, const nlohmann::json& content) {
  nlohmann::json doc = nlohmann::json::parse(make_tokenizer_config_json(512, 4096));
  doc["added_tokens_decoder"][id] = {{"content", content}, {"special", true}};
  return doc.dump();
}

TEST(TokenizerConfig, K3LayoutAtTheRealBase) {
  // Ids straight from k3-model.md §8.1.
  SpecialTokens s = k3_special_tokens(163584);
  auto at = [&](uint32_t id) { return s.spellings.at(id - 163584); };
  EXPECT_EQ(at(163584), "[BOS]");
  EXPECT_EQ(at(163585), "[EOS]");
  EXPECT_EQ(at(163586), "<|end_of_msg|>");
  EXPECT_EQ(at(163587), "<|open|>");
  EXPECT_EQ(at(163588), "<|close|>");
  EXPECT_EQ(at(163589), "<|sep|>");
  EXPECT_EQ(at(163590), "[start_header_id]");
  EXPECT_EQ(at(163591), "[end_header_id]");
  EXPECT_EQ(at(163593), "[EOT]");
  EXPECT_EQ(at(163602), "<|media_begin|>");
  EXPECT_EQ(at(163603), "<|media_content|>");
  EXPECT_EQ(at(163604), "<|media_end|>");
  EXPECT_EQ(at(163605), "<|media_pad|>");
  EXPECT_EQ(at(163649), "<osagent_mode>");
  EXPECT_EQ(at(163837), "<|reserved_token_163837|>");  // the DSpark mask token keeps its default spelling
  EXPECT_EQ(at(163838), "[UNK]");
  EXPECT_EQ(at(163839), "[PAD]");
  EXPECT_EQ(at(163592), "<|reserved_token_163592|>");
  // config.json's bos/eos/pad ids (§2.1).
  EXPECT_EQ(s.bos_id(), 163584u);
  EXPECT_EQ(s.eos_id(), 163586u);
  EXPECT_EQ(s.pad_id(), 163839u);
  EXPECT_EQ(s.id(reserved::kMask), 163837u);
  validate_special_tokens(s, "k3");
}

TEST(TokenizerConfig, GeneratedFileReadsBackAsTheK3Layout) {
  std::string text = make_tokenizer_config_json(512, 4096);
  nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["added_tokens_decoder"]["512"]["content"], "[BOS]");
  EXPECT_EQ(doc["added_tokens_decoder"]["514"]["content"], "<|end_of_msg|>");
  EXPECT_EQ(doc["added_tokens_decoder"]["515"]["content"], "<|open|>");
  EXPECT_EQ(doc["added_tokens_decoder"]["577"]["content"], "<osagent_mode>");
  EXPECT_EQ(doc["added_tokens_decoder"]["767"]["content"], "[PAD]");
  EXPECT_EQ(doc["added_tokens_decoder"].size(), 16u);
  EXPECT_EQ(doc["bos_token"], "[BOS]");
  EXPECT_EQ(doc["eos_token"], "<|end_of_msg|>");
  EXPECT_EQ(doc["pad_token"], "[PAD]");
  EXPECT_EQ(doc["unk_token"], "[UNK]");
  EXPECT_EQ(doc["model_max_length"], 4096);
  EXPECT_EQ(doc["tokenizer_class"], "TikTokenTokenizer");

  test::TempDir dir;
  test::write_bytes(dir.file("tokenizer_config.json"), text);
  SpecialTokens s = read_tokenizer_config(dir.file("tokenizer_config.json"), 512);
  EXPECT_EQ(s.spellings, k3_special_tokens(512).spellings);
  EXPECT_EQ(s.bos_id(), 512u);
  EXPECT_EQ(s.eos_id(), 514u);
  EXPECT_EQ(s.pad_id(), 767u);
  EXPECT_EQ(s.spellings[8], "<|reserved_token_520|>");
}

TEST(TokenizerConfig, OverrideReplacesADefaultSpelling) {
  SpecialTokens s = parse_tokenizer_config(config_with("520", "<think>"), 512, "cfg.json");
  EXPECT_EQ(s.spellings[8], "<think>");
  EXPECT_EQ(s.spellings[10], "<|reserved_token_522|>");
}

TEST(TokenizerConfig, RefusesSpecialIdOutOfRange) {
  expect_error([] { parse_tokenizer_config(config_with("511", "<x>"), 512, "cfg.json"); },
               {"cfg.json", "added_tokens_decoder[\"511\"]", "outside the reserved range 512..767"});
  expect_error([] { parse_tokenizer_config(config_with("768", "<x>"), 512, "cfg.json"); },
               {"cfg.json", "special id 768", "outside the reserved range"});
  expect_error([] { parse_tokenizer_config(config_with("0520", "<x>"), 512, "cfg.json"); },
               {"cfg.json", "added_tokens_decoder[\"0520\"]", "not a decimal token id"});
  expect_error([] { parse_tokenizer_config(config_with("x", "<x>"), 512, "cfg.json"); },
               {"cfg.json", "not a decimal token id"});
}

TEST(TokenizerConfig, RefusesNonAsciiOrEmptySpelling) {
  expect_error([] { parse_tokenizer_config(config_with("520", "<caf\xc3\xa9>"), 512, "cfg.json"); },
               {"cfg.json", "special token 520", "is not ASCII"});
  expect_error([] { parse_tokenizer_config(config_with("520", ""), 512, "cfg.json"); },
               {"cfg.json", "special token 520", "empty spelling"});
  expect_error([] { parse_tokenizer_config(config_with("520", 7), 512, "cfg.json"); },
               {"cfg.json", "content is not a string"});
}

TEST(TokenizerConfig, RefusesDuplicateSpelling) {
  expect_error([] { parse_tokenizer_config(config_with("520", "[BOS]"), 512, "cfg.json"); },
               {"cfg.json", "duplicate special spelling \"[BOS]\"", "ids 512 and 520"});
  // Equal to another id's default spelling.
  expect_error([] { parse_tokenizer_config(config_with("520", "<|reserved_token_522|>"), 512, "cfg.json"); },
               {"cfg.json", "duplicate special spelling", "ids 520 and 522"});
}

TEST(TokenizerConfig, RefusesPrefixAmbiguousSpelling) {
  expect_error([] { parse_tokenizer_config(config_with("520", "[BOS"), 512, "cfg.json"); },
               {"cfg.json", "\"[BOS\" (id 520) is a prefix of \"[BOS]\" (id 512)"});
  expect_error([] { parse_tokenizer_config(config_with("520", "<|open|>x"), 512, "cfg.json"); },
               {"cfg.json", "\"<|open|>\" (id 515) is a prefix of \"<|open|>x\" (id 520)"});
}

TEST(TokenizerConfig, RefusesWrongOrMissingRequiredSpelling) {
  expect_error([] { parse_tokenizer_config(config_with("512", "<s>"), 512, "cfg.json"); },
               {"cfg.json", "special token 512 (base+0) must be spelled [BOS]", "found \"<s>\""});
  expect_error([] { parse_tokenizer_config("{}", 512, "cfg.json"); },
               {"cfg.json", "must be spelled [BOS]", "<|reserved_token_512|>"});
}

TEST(TokenizerConfig, RefusesMalformedJson) {
  expect_error([] { parse_tokenizer_config("{\"added_tokens_decoder\": ", 512, "cfg.json"); },
               {"cfg.json", "not valid JSON"});
  expect_error([] { parse_tokenizer_config("[]", 512, "cfg.json"); }, {"cfg.json", "root is not a JSON object"});
  expect_error([] { parse_tokenizer_config("{\"added_tokens_decoder\": []}", 512, "cfg.json"); },
               {"cfg.json", "added_tokens_decoder is not a JSON object"});
  expect_error([] { parse_tokenizer_config("{\"added_tokens_decoder\": {\"512\": \"[BOS]\"}}", 512, "cfg.json"); },
               {"cfg.json", "added_tokens_decoder[\"512\"] must be an object"});
  test::TempDir dir;
  expect_error([&] { read_tokenizer_config(dir.file("missing.json"), 512); }, {"missing.json"});
}

// Found by fuzz_tiktoken: a number too large for a double is nlohmann's
// out_of_range, not a parse_error, and went past the catch as a
// non-deltafin exception (it would end a run with terminate()).
TEST(TokenizerConfig, ANumberOutOfRangeIsMalformedJson) {
  expect_error([] { parse_tokenizer_config("{\"model_max_length\": 1e999}", 512, "cfg.json"); },
               {"cfg.json", "not valid JSON", "number overflow"});
}

}  // namespace
}  // namespace deltafin
