// The pre-tokenizer: the translation of Rust class syntax into PCRE2 and the
// pieces the K3 pattern (k3-model.md §8.2) gives on small inputs, each split
// derived by hand from the eight alternatives.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_support.h"

namespace deltafin {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const Pretokenizer& p, std::string_view text) {
  Pieces out;
  for (std::string_view piece : p.split(text)) out.emplace_back(piece);
  return out;
}

const Pretokenizer& k3() {
  static const Pretokenizer p(kK3Pattern);
  return p;
}

using test::expect_error;

TEST(K3Pattern, IsTheSpecPatternVerbatim) {
  // The eight alternatives of k3-model.md §8.2, in order.
  const char* alternatives[] = {
      R"([\p{Han}]+)",
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)",
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)",
      R"(\p{N}{1,3})",
      R"( ?[^\s\p{L}\p{N}]+[\r\n]*)",
      R"(\s*[\r\n]+)",
      R"(\s+(?!\S))",
      R"(\s+)",
  };
  std::string joined;
  for (const char* a : alternatives) {
    if (!joined.empty()) joined += '|';
    joined += a;
  }
  EXPECT_EQ(std::string(kK3Pattern), joined);
}

TEST(RegexTranslate, IntersectionWithNegatedClassBecomesNegativeLookahead) {
  // The rewrite k3-model.md §8.2 gives.
  EXPECT_EQ(translate_class_intersection(R"([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]])"),
            R"((?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]))");
  EXPECT_EQ(translate_class_intersection(R"([a-z&&[^aeiou]]+x)"), R"((?:(?![aeiou])[a-z])+x)");
  // Plain classes and everything outside classes are untouched.
  EXPECT_EQ(translate_class_intersection(R"([^\r\n\p{L}\p{N}]?\s+(?!\S)|(?i:'s))"),
            R"([^\r\n\p{L}\p{N}]?\s+(?!\S)|(?i:'s))");
}

TEST(RegexTranslate, GeneralIntersectionNestingAndNegation) {
  EXPECT_EQ(translate_class_intersection(R"([\p{L}&&[a-f]])"), R"((?:(?=[a-f])[\p{L}]))");
  EXPECT_EQ(translate_class_intersection(R"([\p{L}&&[^a]&&[^b]])"), R"((?:(?![a])(?![b])[\p{L}]))");
  EXPECT_EQ(translate_class_intersection(R"([a[0-9]])"), R"((?:[a]|[0-9]))");
  EXPECT_EQ(translate_class_intersection(R"([^a-z&&[^aeiou]])"),
            R"((?:(?!(?:(?![aeiou])[a-z]))[\x{0}-\x{10FFFF}]))");
  EXPECT_EQ(translate_class_intersection(R"([]a])"), R"([\]a])");  // Rust: ']' first is a literal
}

TEST(RegexTranslate, TranslatedClassesMatchLikeRustSets) {
  EXPECT_EQ(split(Pretokenizer(R"([a-z&&[^aeiou]]+)"), "strength of"), (Pieces{"str", "ngth", "f"}));
  EXPECT_EQ(split(Pretokenizer(R"([^a-z&&[^aeiou]]+)"), "hello"), (Pieces{"e", "o"}));
  EXPECT_EQ(split(Pretokenizer(R"([a[0-9]]+)"), "a1b22"), (Pieces{"a1", "22"}));
  EXPECT_EQ(split(Pretokenizer(R"([\p{L}&&[^a]&&[^b]]+)"), "abcab"), (Pieces{"c"}));
}

TEST(RegexTranslate, FullTranslationSpellsWhitespaceAndScripts) {
  std::string ws = kWhiteSpaceClassItems;
  EXPECT_EQ(translate_to_pcre2(R"(\s+(?!\S))"), "[" + ws + "]+(?![^" + ws + "])");
  EXPECT_EQ(translate_to_pcre2(R"([^\s\p{L}])"), "[^" + ws + "\\p{L}]");
  EXPECT_EQ(translate_to_pcre2(R"([\p{Han}]+)"), R"([\p{sc:Han}]+)");
  EXPECT_EQ(translate_to_pcre2(R"(\p{L}\pN\P{Lu}\p{Greek})"), R"(\p{L}\p{N}\P{Lu}\p{sc:Greek})");
  EXPECT_EQ(translate_to_pcre2(R"(\u{3000}\u0041\d\v)"), R"(\x{3000}\x{0041}\p{Nd}\x{B})");
  EXPECT_EQ(translate_to_pcre2(R"([\p{L}&&[^\p{Han}]])"), R"((?:(?!\p{sc:Han})[\p{L}]))");
  // \S inside a class: the complement items, so [\S] is "not White_Space".
  EXPECT_EQ(split(Pretokenizer(R"([\S]+)"), "ab\xc2\x85" "cd"), (Pieces{"ab", "cd"}));
}

TEST(RegexTranslate, RefusesWhatItCannotTranslateFaithfully) {
  expect_error([] { translate_to_pcre2(R"(\w+)"); }, {"at offset 0", "\\w is not supported"});
  expect_error([] { translate_to_pcre2(R"(a\b)"); }, {"at offset 1", "\\b is not supported"});
  expect_error([] { translate_to_pcre2(R"([a-z--b])"); }, {"at offset 4", "'--'"});
  expect_error([] { translate_to_pcre2(R"([[:alpha:]])"); }, {"POSIX"});
  expect_error([] { translate_to_pcre2(R"([abc)"); }, {"unterminated character class"});
  expect_error([] { translate_to_pcre2(R"([a&&])"); }, {"empty right operand"});
  expect_error([] { Pretokenizer p(R"(\p{NoSuchProperty})"); }, {"does not compile", "NoSuchProperty"});
}

TEST(Pretokenizer, SpecTestVectorsSplitIntoTheirPieces) {
  // k3-model.md §8.4: these give 4 and 4 ids with the real vocabulary.
  EXPECT_EQ(split(k3(), "Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
  EXPECT_EQ(split(k3(), "Hello\n\nworld  "), (Pieces{"Hello", "\n\n", "world", "  "}));
}

TEST(Pretokenizer, HanRunsAreTheirOwnPieces) {
  EXPECT_EQ(split(k3(), "你好世界abc"), (Pieces{"你好世界", "abc"}));
  EXPECT_EQ(split(k3(), "abc你好def"), (Pieces{"abc", "你好", "def"}));
  // 々 (U+3005) is Script=Han; 。 (U+3002) only has Han in Script_Extensions,
  // which Rust's \p{Han} does not use.
  EXPECT_EQ(split(k3(), "時々。"), (Pieces{"時々", "。"}));
  EXPECT_EQ(split(k3(), " 世界"), (Pieces{" ", "世界"}));
  // Kana and the prolonged sound mark ー (Lm, Script=Common) are letters, not Han.
  EXPECT_EQ(split(k3(), "カーテン漢字"), (Pieces{"カーテン", "漢字"}));
}

TEST(Pretokenizer, CaseRunsAndContractions) {
  EXPECT_EQ(split(k3(), "don't"), (Pieces{"don't"}));
  EXPECT_EQ(split(k3(), "I'm"), (Pieces{"I'm"}));
  EXPECT_EQ(split(k3(), "THEY'RE"), (Pieces{"THEY'RE"}));
  EXPECT_EQ(split(k3(), "it'S we'Ll"), (Pieces{"it'S", " we'Ll"}));
  EXPECT_EQ(split(k3(), "HTTPServer"), (Pieces{"HTTPServer"}));  // A* takes HTTPS, B+ takes erver
  EXPECT_EQ(split(k3(), "camelCase"), (Pieces{"camel", "Case"}));
  // Case-insensitive 's also matches U+017F LONG S, as Rust's (?i) does.
  EXPECT_EQ(split(k3(), "x'\xc5\xbf"), (Pieces{"x'\xc5\xbf"}));
  // Only ASCII apostrophe: U+2019 is punctuation of its own.
  EXPECT_EQ(split(k3(), "it\xe2\x80\x99s"), (Pieces{"it", "\xe2\x80\x99s"}));
  EXPECT_EQ(split(k3(), "e\xcc\x81t\xc3\xa9"), (Pieces{"e\xcc\x81t\xc3\xa9"}));  // combining acute is \p{M}
}

TEST(Pretokenizer, DigitsGroupInThrees) {
  EXPECT_EQ(split(k3(), "12345678"), (Pieces{"123", "456", "78"}));
  EXPECT_EQ(split(k3(), "abc1234def"), (Pieces{"abc", "123", "4", "def"}));
  EXPECT_EQ(split(k3(), "x 42"), (Pieces{"x", " ", "42"}));
}

TEST(Pretokenizer, WhitespaceBeforeWordsAndAtTheEnd) {
  EXPECT_EQ(split(k3(), "  hello"), (Pieces{" ", " hello"}));
  EXPECT_EQ(split(k3(), "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split(k3(), "a \t"), (Pieces{"a", " \t"}));
  EXPECT_EQ(split(k3(), "a\tb"), (Pieces{"a", "\tb"}));  // one non-newline character may lead a word
  EXPECT_EQ(split(k3(), " !!x"), (Pieces{" !!", "x"}));
}

TEST(Pretokenizer, Newlines) {
  EXPECT_EQ(split(k3(), "a\n\nb"), (Pieces{"a", "\n\n", "b"}));
  EXPECT_EQ(split(k3(), "a\r\n  b"), (Pieces{"a", "\r\n", " ", " b"}));
  EXPECT_EQ(split(k3(), "x.\n\ny"), (Pieces{"x", ".\n\n", "y"}));
  EXPECT_EQ(split(k3(), "  \n x"), (Pieces{"  \n", " x"}));
}

TEST(Pretokenizer, UnicodeWhiteSpaceIsExactlyRustsSet) {
  // U+0085 NEL and U+3000 are White_Space: a lone one may lead a word, a run
  // leaves its last character to the word.
  EXPECT_EQ(split(k3(), "\xc2\x85word"), (Pieces{"\xc2\x85word"}));
  EXPECT_EQ(split(k3(), "\xc2\x85\xc2\x85word"), (Pieces{"\xc2\x85", "\xc2\x85word"}));
  EXPECT_EQ(split(k3(), "\xe3\x80\x80\xe3\x80\x80word"), (Pieces{"\xe3\x80\x80", "\xe3\x80\x80word"}));
  EXPECT_EQ(split(k3(), "a\xc2\xa0\xc2\xa0"), (Pieces{"a", "\xc2\xa0\xc2\xa0"}));
  // U+180E is not White_Space (PCRE2's own \s would say it is): it is
  // punctuation-like, so alternative 5 takes the run.
  EXPECT_EQ(split(k3(), "\xe1\xa0\x8e\xe1\xa0\x8eword"), (Pieces{"\xe1\xa0\x8e\xe1\xa0\x8e", "word"}));
  // U+001C is Python whitespace but not White_Space.
  EXPECT_EQ(split(k3(), "a\x1c" "b"), (Pieces{"a", "\x1c" "b"}));
}

TEST(Pretokenizer, SymbolsAndEmoji) {
  EXPECT_EQ(split(k3(), "\xf0\x9f\x98\x80\xf0\x9f\x98\x80 ok"), (Pieces{"\xf0\x9f\x98\x80\xf0\x9f\x98\x80", " ok"}));
  EXPECT_EQ(split(k3(), "a+=b;"), (Pieces{"a", "+=", "b", ";"}));
}

TEST(Pretokenizer, RefusesInvalidUtf8AndHandlesEmpty) {
  EXPECT_TRUE(k3().split("").empty());
  expect_error([] { k3().split("ok\xc3"); }, {"not valid UTF-8", "byte offset 2"});
}

TEST(Pretokenizer, OtherTiktokenPatternsCompile) {
  // cl100k_base's pattern (from the tiktoken package): contractions first.
  Pretokenizer cl100k(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  EXPECT_EQ(split(cl100k, "I'M don't 12345"), (Pieces{"I", "'M", " don", "'t", " ", "123", "45"}));
}

TEST(Pretokenizer, LongRunsMatchWithoutExhaustingTheStack) {
  // The longest runs the long-input guard lets through: 25,000 letters (a
  // repeated group in the translated pattern) and 25,000 spaces.
  std::string letters(25000, 'a'), upper(25000, 'A'), spaces(25000, ' ');
  EXPECT_EQ(split(k3(), letters), (Pieces{letters}));
  EXPECT_EQ(split(k3(), upper), (Pieces{upper}));
  EXPECT_EQ(split(k3(), spaces + "x"), (Pieces{std::string(24999, ' '), " x"}));
}

}  // namespace
}  // namespace deltafin
