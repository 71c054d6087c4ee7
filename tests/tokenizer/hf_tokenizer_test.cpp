// HfTokenizer on tiny tokenizer.json files written here, with ids worked out
// by hand from the Hugging Face BPE rules: merges ranked by their position in
// the merges list (not by the id of the joined token), leftmost first on ties,
// Split "Isolated" keeping the text between matches, NFC before splitting,
// added tokens cut out of the raw text first. And every refusal message.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/nfc.h"
#include "util/error.h"

namespace deltafin {
namespace {

using nlohmann::json;
using Ids = std::vector<uint32_t>;

// A tiny byte-level BPE tokenizer.json: ids 0..255 are the single bytes in
// byte order (so the id of a byte is the byte), then
//   256 "ab", 257 "bc", 258 "abc", 259 "aa", 260 "Ġab" (" ab")
// merges, rank by position: 0 "b c", 1 "a b", 2 "a a", 3 "Ġ ab".
// Pre-tokenizer: Split on ` ?[a-z]+`, Isolated (so "!" between words is a
// piece of its own), then ByteLevel. Added tokens 300 "<|x|>" (special), 301 "<t>" (not special).
json base_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab["bc"] = 257;
  vocab["abc"] = 258;
  vocab["aa"] = 259;
  vocab[bytes_to_byte_level(" ab")] = 260;
  json merges = json::array({"b c", "a b", "a a", bytes_to_byte_level(" ") + " ab"});
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  auto added = [](uint32_t id, const std::string& content, bool special) {
    return json{{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false},  {"normalized", false}, {"special", special}};
  };
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array({added(300, "<|x|>", true), added(301, "<t>", false)})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({json{{"type", "Split"}, {"pattern", {{"Regex", " ?[a-z]+"}}}, {"behavior", "Isolated"},
                           {"invert", false}},
                      byte_level})}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}}};
}

class HfTokenizerTest : public ::testing::Test {
protected:
  HfTokenizer load(const json& j) {
    std::string path = dir_.file("tokenizer.json");
    test::write_bytes(path, j.dump());
    return HfTokenizer::load(path);
  }
  // The message load gives for `j`, or "" if it loads.
  std::string load_error(const json& j) {
    try {
      load(j);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string path() const { return dir_.file("tokenizer.json"); }
  test::TempDir dir_;
};

TEST_F(HfTokenizerTest, MergesApplyInMergeListOrderNotTokenIdOrder) {
  HfTokenizer t = load(base_json());
  // "abc": merge 0 is "b c", so bc forms first even though "ab" has the lower
  // id (tiktoken's rule would give [256 "ab", 99 "c"]); no merge "a bc"
  // exists, so "abc" (258) is never reached although it is in the vocab.
  EXPECT_EQ(t.encode("abc", false), (Ids{97, 257}));
  EXPECT_EQ(t.encode("ab", false), (Ids{256}));
  // " ab": "a b" (rank 1) then "Ġ ab" (rank 3).
  EXPECT_EQ(t.encode(" ab", false), (Ids{260}));
  // " abc": "b c" first, then no merge applies to (Ġ, a, bc).
  EXPECT_EQ(t.encode(" abc", false), (Ids{32, 97, 257}));
}

TEST_F(HfTokenizerTest, EqualMergesJoinLeftmostFirst) {
  HfTokenizer t = load(base_json());
  EXPECT_EQ(t.encode("aaa", false), (Ids{259, 97}));     // (aa)a, not a(aa)
  EXPECT_EQ(t.encode("aaaa", false), (Ids{259, 259}));   // (aa)(aa)
  EXPECT_EQ(t.encode("aaaaa", false), (Ids{259, 259, 97}));
  // "aab": "a b" (rank 1) beats "a a" (rank 2) although "aa" is further left.
  EXPECT_EQ(t.encode("aab", false), (Ids{97, 256}));
}

TEST_F(HfTokenizerTest, IgnoreMergesTakesWholeVocabPieces) {
  json j = base_json();
  j["model"]["ignore_merges"] = true;
  HfTokenizer t = load(j);
  EXPECT_EQ(t.encode("abc", false), (Ids{258}));       // the whole piece is a token
  EXPECT_EQ(t.encode("abca", false), (Ids{97, 257, 97}));  // not a token: merges as before
}

TEST_F(HfTokenizerTest, IsolatedSplitKeepsTextBetweenMatchesAndMergesNeverCrossPieces) {
  HfTokenizer t = load(base_json());
  // Pieces: "ab", "!" (between matches), " ab", "  " (trailing, no match).
  EXPECT_EQ(t.encode("ab! ab  ", false), (Ids{256, 33, 260, 32, 32}));
  // "a" and "b" are in different pieces ("a", "-", "b"): never merged.
  EXPECT_EQ(t.encode("a-b", false), (Ids{97, 45, 98}));
  EXPECT_EQ(t.encode("", false), (Ids{}));
}

TEST_F(HfTokenizerTest, MergesAsPairsEqualMergesAsStrings) {
  json j = base_json();
  json pairs = json::array();
  for (const json& m : j["model"]["merges"]) {
    std::string s = m.get<std::string>();
    size_t sp = s.find(' ');
    pairs.push_back(json::array({s.substr(0, sp), s.substr(sp + 1)}));
  }
  j["model"]["merges"] = pairs;
  HfTokenizer from_pairs = load(j);
  HfTokenizer from_strings = load(base_json());
  for (const char* text : {"abc", "aab", " ab", "aaaaa", "ab! ab  ", "zz abcab"})
    EXPECT_EQ(from_pairs.encode(text, false), from_strings.encode(text, false)) << text;
  EXPECT_EQ(from_pairs.encode(" abc", false), (Ids{32, 97, 257}));
}

TEST_F(HfTokenizerTest, AddedTokensAreCutFromTheRawTextWhenAllowed) {
  HfTokenizer t = load(base_json());
  EXPECT_EQ(t.encode("ab<|x|>ab<t>", true), (Ids{256, 300, 256, 301}));
  // Not allowed: the spellings are ordinary text. Pieces "ab", "<|", "x",
  // "|>", "ab", "<", "t", ">".
  EXPECT_EQ(t.encode("ab<|x|>ab<t>", false), (Ids{256, 60, 124, 120, 124, 62, 256, 60, 116, 62}));
  // Adjacent, repeated, and at the ends; a broken spelling is text.
  EXPECT_EQ(t.encode("<|x|><|x|><t>", true), (Ids{300, 300, 301}));
  EXPECT_EQ(t.encode("<|x|", true), (Ids{60, 124, 120, 124}));
  // The text on each side is its own section: "a" + "b" do not merge across.
  EXPECT_EQ(t.encode("a<t>b", true), (Ids{97, 301, 98}));
}

TEST_F(HfTokenizerTest, LongestAddedTokenWinsAtTheSameStart) {
  json j = base_json();
  j["added_tokens"].push_back({{"id", 302}, {"content", "<|x|>y"}, {"single_word", false}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", true}});
  HfTokenizer t = load(j);
  EXPECT_EQ(t.encode("<|x|>y<|x|>z", true), (Ids{302, 300, 122}));
}

TEST_F(HfTokenizerTest, NfcIsAppliedBeforeSplittingAndNormalizedAddedTokensMatchAfterIt) {
  const std::string decomposed = "e\xcc\x81";  // e + U+0301 combining acute
  const std::string composed = "\xc3\xa9";     // U+00E9 é
  {
    HfTokenizer t = load(base_json());
    EXPECT_EQ(t.encode(decomposed, false), (Ids{0xC3, 0xA9}));
    EXPECT_EQ(t.encode(composed, false), (Ids{0xC3, 0xA9}));
    // Hangul jamo compose to one syllable: U+1100 U+1161 -> U+AC00 (EA B0 80).
    EXPECT_EQ(t.encode("\xe1\x84\x80\xe1\x85\xa1", false), (Ids{0xEA, 0xB0, 0x80}));
  }
  {
    json j = base_json();
    j["normalizer"] = nullptr;  // no normalizer: the bytes stay as given
    HfTokenizer t = load(j);
    EXPECT_EQ(t.encode(decomposed, false), (Ids{101, 0xCC, 0x81}));
  }
  {
    // An added "ș" (U+0219; NFD: s + U+0326 comma below) with normalized:
    // true is found after NFC, so in the decomposed text too; with
    // normalized: false only as typed. ("é" itself could not be an added
    // token here: it is the byte-level spelling of byte 0xE9, a vocab key.)
    const std::string s_comma = "\xc8\x99", s_comma_nfd = "s\xcc\xa6";
    json j = base_json();
    j["added_tokens"].push_back({{"id", 310}, {"content", s_comma}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", true}, {"special", false}});
    HfTokenizer t = load(j);
    EXPECT_EQ(t.encode(s_comma_nfd, true), (Ids{310}));
    EXPECT_EQ(t.encode("a" + s_comma + "b", true), (Ids{97, 310, 98}));
    EXPECT_EQ(t.encode(s_comma_nfd, false), (Ids{0xC8, 0x99}));
    j["added_tokens"].back()["normalized"] = false;
    HfTokenizer raw = load(j);
    EXPECT_EQ(raw.encode(s_comma, true), (Ids{310}));
    EXPECT_EQ(raw.encode(s_comma_nfd, true), (Ids{0xC8, 0x99}));
  }
}

TEST_F(HfTokenizerTest, NormalizerSequenceIsItsMembersInTurn) {
  const std::string decomposed = "e\xcc\x81";  // e + combining acute; NFC gives U+00E9
  json j = base_json();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};  // DeepSeek V3's: none
  EXPECT_EQ(load(j).encode(decomposed, false), (Ids{101, 0xcc, 0x81}));
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
  EXPECT_EQ(load(j).encode(decomposed, false), (Ids{0xc3, 0xa9}));
}

// DeepSeek V3 lists <｜begin▁of▁sentence｜> (id 0) in model.vocab as well as in
// added_tokens: a key outside the byte-level alphabet, which BPE never makes.
TEST_F(HfTokenizerTest, VocabKeysOutsideTheByteAlphabetAreReachedOnlyAsAddedTokens) {
  const std::string bos = "<\xef\xbd\x9c" "bos\xef\xbd\x9c>";  // <｜bos｜>
  json j = base_json();
  j["model"]["vocab"][bos] = 261;
  j["model"]["vocab"]["<|lone|>"] = 262;  // '|' is in the alphabet; a space is not:
  j["model"]["vocab"].erase("<|lone|>");
  j["model"]["vocab"]["lone word"] = 262;
  j["added_tokens"].push_back({{"id", 261}, {"content", bos}, {"single_word", false}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", true}});
  HfTokenizer t = load(j);
  EXPECT_EQ(t.encode(bos, true), (Ids{261}));
  const Ids ordinary = t.encode(bos, false);
  EXPECT_EQ(std::count(ordinary.begin(), ordinary.end(), 261u), 0);
  EXPECT_EQ(t.decode(ordinary), bos);
  EXPECT_EQ(t.decode(Ids{261}), bos);
  EXPECT_EQ(t.token_id(bos), 261u);
  // Without an added token it is never produced, and decodes to its UTF-8,
  // as the ByteLevel decoder gives a string outside its alphabet.
  const Ids words = t.encode("lone word", true);
  EXPECT_EQ(std::count(words.begin(), words.end(), 262u), 0);
  EXPECT_EQ(t.decode(Ids{262}), "lone word");
  EXPECT_EQ(t.token_id("lone word"), 262u);
  EXPECT_EQ(t.model_vocab_size(), 263u);
}

TEST_F(HfTokenizerTest, DecodeGivesRawBytesAndRoundTrips) {
  HfTokenizer t = load(base_json());
  EXPECT_EQ(t.decode(Ids{256, 300, 260, 301}), "ab<|x|> ab<t>");
  EXPECT_EQ(t.decode(Ids{0xC3}), "\xc3");  // half a character: raw bytes, no repair
  EXPECT_EQ(t.decode(Ids{}), "");
  for (const std::string text : {"ab! ab  ", "hello <|x|> w\xc3\xb6rld\n\t", "\xe4\xb8\xad\xe6\x96\x87 aab<t>",
                                 "\xf0\x9f\x98\x80\xe2\x80\x8d!"}) {
    EXPECT_EQ(t.decode(t.encode(text, true)), text);
    EXPECT_EQ(t.decode(t.encode(text, false)), text);
  }
  EXPECT_THROW(t.decode(Ids{299}), Error);  // between the vocab and the added tokens
  EXPECT_THROW(t.decode(Ids{302}), Error);
}

TEST_F(HfTokenizerTest, VocabSizeAndTokenIds) {
  HfTokenizer t = load(base_json());
  EXPECT_EQ(t.vocab_size(), 302u);  // max id 301 + 1
  EXPECT_EQ(t.model_vocab_size(), 261u);
  EXPECT_EQ(t.token_id("<|x|>"), 300u);
  EXPECT_EQ(t.token_id("<t>"), 301u);
  EXPECT_EQ(t.token_id("ab"), 256u);
  EXPECT_EQ(t.token_id("\xc4\xa0" "ab"), 260u);  // "Ġab", the JSON spelling of " ab"
  EXPECT_EQ(t.token_id("\xc4\xa0"), 32u);         // "Ġ" is the space byte
  EXPECT_EQ(t.token_id("zz"), std::nullopt);
  EXPECT_EQ(t.token_id(" ab"), std::nullopt);     // a raw space is not byte-level
}

TEST_F(HfTokenizerTest, InvalidUtf8InputIsRefused) {
  HfTokenizer t = load(base_json());
  EXPECT_THROW(t.encode("a\xff", true), Error);
}

TEST(ByteLevel, Gpt2ByteMapFacts) {
  // Printable bytes stand for themselves; the others take U+0100 upwards in
  // byte order: NUL -> U+0100 "Ā", LF -> U+010A "Ċ", space -> U+0120 "Ġ",
  // DEL -> U+0121 "ġ", 0xA0 -> U+0142 "ł", soft hyphen 0xAD -> U+0143 "Ń".
  EXPECT_EQ(byte_level_char('A'), uint32_t{'A'});
  EXPECT_EQ(byte_level_char(0xE9), 0xE9u);
  EXPECT_EQ(byte_level_char(0x00), 0x100u);
  EXPECT_EQ(byte_level_char('\n'), 0x10Au);
  EXPECT_EQ(byte_level_char(' '), 0x120u);
  EXPECT_EQ(byte_level_char(0x7F), 0x121u);
  EXPECT_EQ(byte_level_char(0xA0), 0x142u);
  EXPECT_EQ(byte_level_char(0xAD), 0x143u);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level_to_bytes(bytes_to_byte_level(all)), all);
  EXPECT_EQ(bytes_to_byte_level(" the\n"), "\xc4\xa0the\xc4\x8a");  // "Ġthe" + "Ċ"
  EXPECT_EQ(byte_level_to_bytes(" "), std::nullopt);          // a raw space is not in the alphabet
  EXPECT_EQ(byte_level_to_bytes("\xc5\x84"), std::nullopt);  // U+0144, one past the last mapped character
  EXPECT_EQ(byte_level_byte(0x144), std::nullopt);
}

TEST(Nfc, ComposesReordersAndKeepsExclusions) {
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc_normalize("e\xcc\x81"), "\xc3\xa9");                                  // e + acute -> é
  EXPECT_EQ(nfc_normalize("\xe2\x84\xab"), "\xc3\x85");                               // ANGSTROM SIGN -> Å
  EXPECT_EQ(nfc_normalize("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8"), "\xea\xb0\x81");  // jamo -> 각
  EXPECT_EQ(nfc_normalize("q\xcc\x87\xcc\xa3"), "q\xcc\xa3\xcc\x87");               // marks reordered by class
  EXPECT_EQ(nfc_normalize("\xe0\xa5\x98"), "\xe0\xa4\x95\xe0\xa4\xbc");             // U+0958 is excluded
  EXPECT_EQ(nfc_normalize("\xef\xac\x81"), "\xef\xac\x81");                          // ﬁ: compatibility only
  EXPECT_EQ(nfc_normalize(""), "");
}

// Each refusal: a change to the base file and the exact message after
// "<path>: ".
struct Refusal {
  const char* name;
  std::function<void(json&)> change;
  std::string message;
};

TEST_F(HfTokenizerTest, EveryUnsupportedFeatureIsRefusedNamingFileAndField) {
  auto byte_level = [] {
    return json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  };
  std::vector<Refusal> cases = {
      {"unknown top-level key", [](json& j) { j["extra"] = 1; }, "extra is not supported"},
      {"version", [](json& j) { j["version"] = "2.0"; }, "version \"2.0\" is not supported (only \"1.0\")"},
      {"truncation", [](json& j) { j["truncation"] = {{"max_length", 8}}; },
       "truncation {\"max_length\":8} is not supported (only null)"},
      {"padding", [](json& j) { j["padding"] = {{"length", 8}}; },
       "padding {\"length\":8} is not supported (only null)"},
      {"normalizer type", [](json& j) { j["normalizer"] = {{"type", "NFKC"}}; },
       "normalizer.type \"NFKC\" is not supported"},
      {"normalizer sequence of another normalizer",
       [](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFKC"}}})}}; },
       "normalizer.normalizers[0].type \"NFKC\" is not supported"},
      {"Metaspace pre-tokenizer",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Metaspace"}, {"replacement", "_"}}; },
       "pre_tokenizer.pretokenizers[1].type \"Metaspace\" is not supported"},
      {"bare Split pre-tokenizer",
       [](json& j) { j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0]; },
       "pre_tokenizer.type \"Split\" is not supported"},
      {"no pre-tokenizer", [](json& j) { j["pre_tokenizer"] = nullptr; },
       "pre_tokenizer is null; a ByteLevel pre-tokenizer is required"},
      {"empty sequence", [](json& j) { j["pre_tokenizer"]["pretokenizers"] = json::array(); },
       "pre_tokenizer is an empty sequence; a ByteLevel pre-tokenizer is required"},
      {"Split last", [](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); },
       "pre_tokenizer.pretokenizers[0] is a Split last; the sequence must end with ByteLevel"},
      {"ByteLevel first",
       [&](json& j) {
         j["pre_tokenizer"]["pretokenizers"] = json::array({byte_level(), j["pre_tokenizer"]["pretokenizers"][0]});
       },
       "pre_tokenizer.pretokenizers[0] is a ByteLevel before the end; it must be the last pre-tokenizer"},
      {"Split behavior", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
       "pre_tokenizer.pretokenizers[0].behavior \"Removed\" is not supported (only \"Isolated\")"},
      {"Split invert", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; },
       "pre_tokenizer.pretokenizers[0].invert true is not supported (only false)"},
      {"Split String pattern",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}}; },
       "pre_tokenizer.pretokenizers[0].pattern is not a {\"Regex\": ...} (String patterns are not supported)"},
      {"Split regex that does not compile",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(a"}}; },
       "pre_tokenizer.pretokenizers[0].pattern.Regex cannot be compiled: "},
      {"ByteLevel add_prefix_space",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; },
       "pre_tokenizer.pretokenizers[1].add_prefix_space true is not supported (only false)"},
      {"ByteLevel use_regex absent (defaults to true)",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][1].erase("use_regex"); },
       "pre_tokenizer.pretokenizers[1].use_regex true is not supported (only false)"},
      {"post-processor", [](json& j) { j["post_processor"] = {{"type", "TemplateProcessing"}}; },
       "post_processor.type \"TemplateProcessing\" is not supported"},
      {"decoder type", [](json& j) { j["decoder"] = {{"type", "Metaspace"}}; },
       "decoder.type \"Metaspace\" is not supported"},
      {"no decoder", [](json& j) { j["decoder"] = nullptr; }, "decoder is null; a ByteLevel decoder is required"},
      {"model type", [](json& j) { j["model"]["type"] = "WordPiece"; }, "model.type \"WordPiece\" is not supported"},
      {"model unknown key", [](json& j) { j["model"]["max_input_chars_per_word"] = 100; },
       "model.max_input_chars_per_word is not supported"},
      {"dropout", [](json& j) { j["model"]["dropout"] = 0.25; }, "model.dropout 0.25 is not supported (only null)"},
      {"unk_token", [](json& j) { j["model"]["unk_token"] = "<unk>"; },
       "model.unk_token \"<unk>\" is not supported (only null)"},
      {"byte_fallback", [](json& j) { j["model"]["byte_fallback"] = true; },
       "model.byte_fallback true is not supported (only false)"},
      {"continuing_subword_prefix", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
       "model.continuing_subword_prefix \"##\" is not supported (only \"\")"},
      {"end_of_word_suffix", [](json& j) { j["model"]["end_of_word_suffix"] = "</w>"; },
       "model.end_of_word_suffix \"</w>\" is not supported (only \"\")"},
      {"no vocab", [](json& j) { j["model"].erase("vocab"); }, "model.vocab is missing"},
      {"vocab id gap", [](json& j) { j["model"]["vocab"]["aa"] = 400; },
       "model.vocab[\"aa\"] is id 400, but the 261 vocab ids must be 0..260"},
      {"vocab id twice", [](json& j) { j["model"]["vocab"]["aa"] = 256; },
       "is id 256, which another vocab token already has"},
      {"merge into a vocab key that is not byte-level",
       [](json& j) {
         j["model"]["vocab"].erase("aa");
         j["model"]["vocab"]["a a"] = 259;  // a token BPE can never make, so no merge may make it
       },
       "model.merges[2] joins to \"aa\", which is not in model.vocab"},
      {"missing byte",
       [](json& j) {
         j["model"]["vocab"].erase("a");
         j["model"]["vocab"]["zzz"] = 97;  // keeps the ids contiguous
       },
       "model.vocab lacks the byte-level token \"a\" of byte 97 (every byte needs one)"},
      {"negative id", [](json& j) { j["model"]["vocab"]["aa"] = -1; },
       "model.vocab[\"aa\"] is not a token id (an integer from 0 to 4294967294)"},
      {"merge string with two spaces", [](json& j) { j["model"]["merges"][0] = "a b c"; },
       "model.merges[0] \"a b c\" is not two tokens separated by one space"},
      {"merge pair of three", [](json& j) { j["model"]["merges"][0] = json::array({"a", "b", "c"}); },
       "model.merges[0] is not a pair [left, right]"},
      {"merge number", [](json& j) { j["model"]["merges"][0] = 7; },
       "model.merges[0] is neither a string \"a b\" nor a pair [a, b]"},
      {"merge of an unknown token", [](json& j) { j["model"]["merges"][1] = "a xyz"; },
       "model.merges[1] uses \"xyz\", which is not in model.vocab"},
      {"merge whose join is not a token", [](json& j) { j["model"]["merges"][1] = "c a"; },
       "model.merges[1] joins to \"ca\", which is not in model.vocab"},
      {"added lstrip", [](json& j) { j["added_tokens"][0]["lstrip"] = true; },
       "added_tokens[0].lstrip true is not supported (only false)"},
      {"added rstrip", [](json& j) { j["added_tokens"][1]["rstrip"] = true; },
       "added_tokens[1].rstrip true is not supported (only false)"},
      {"added single_word", [](json& j) { j["added_tokens"][0]["single_word"] = true; },
       "added_tokens[0].single_word true is not supported (only false)"},
      {"added unknown key", [](json& j) { j["added_tokens"][0]["weight"] = 1; },
       "added_tokens[0].weight is not supported"},
      {"added id of another vocab token", [](json& j) { j["added_tokens"][0]["id"] = 97; },
       "added_tokens[0].id is 97, the id of vocab token \"a\", not of \"<|x|>\""},
      {"added id twice", [](json& j) { j["added_tokens"][1]["id"] = 300; },
       "added_tokens[1].id is 300, which another added token already has"},
      {"added content twice", [](json& j) { j["added_tokens"][1]["content"] = "<|x|>"; },
       "added_tokens[1].content \"<|x|>\" is already an added token"},
      {"added content empty", [](json& j) { j["added_tokens"][1]["content"] = ""; },
       "added_tokens[1].content is empty"},
      {"added vocab token under another id", [](json& j) { j["added_tokens"][1]["content"] = "ab"; },
       "added_tokens[1].id is 301, but \"ab\" is vocab token 256"},
  };
  for (const Refusal& c : cases) {
    json j = base_json();
    c.change(j);
    std::string message = load_error(j);
    EXPECT_EQ(message.rfind(path() + ": ", 0), 0u) << c.name << ": " << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << c.name << ":\n  got:      " << message
                                                          << "\n  expected: " << c.message;
  }
  // The message names the file as given: tokenizer.json and the field.
  json j = base_json();
  j["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Metaspace"}};
  EXPECT_EQ(load_error(j), path() + ": pre_tokenizer.pretokenizers[1].type \"Metaspace\" is not supported");
  // Files that are not tokenizer.json at all.
  test::write_bytes(path(), "{ not json");
  EXPECT_THROW(HfTokenizer::load(path()), Error);
  EXPECT_THROW(HfTokenizer::load(dir_.file("missing.json")), Error);
  // And the base file itself loads: the refusals come from the changes.
  EXPECT_EQ(load_error(base_json()), "");
}

}  // namespace
}  // namespace deltafin
