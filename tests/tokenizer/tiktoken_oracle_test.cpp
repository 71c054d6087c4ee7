// Cross-check against the real tiktoken (k3-model.md §8.3): the `tiktoken`
// npm package is tiktoken's Rust core compiled to WASM, with fancy-regex for
// the pre-tokenizer. On a seeded corpus of more than 20,000 strings our
// Tokenizer must give exactly its ids for
//   (a) cl100k_base with its own pattern,
//   (b) o200k_base with its own pattern,
//   (c) o200k_base's ranks with the K3 pattern passed to fancy-regex verbatim
//       (with `&&`): the check that our PCRE2 translation of the K3 pattern
//       splits like the Rust regex engine does,
// and recognise special tokens as tiktoken's encode(text, "all") does.
//
// The package is installed with npm into <build dir>/tiktoken-oracle (reused
// when present). Without node/npm the tests skip loudly; with CI=true they
// fail instead. Oracle results are cached there under a hash of the request
// and of oracle.mjs, so ctest's one-process-per-test runs node only once.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/tiktoken_file.h"
#include "support/test_support.h"
#include "tokenizer/node_oracle.h"
#include "tokenizer/oracle_corpus.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {
// A namespace of its own: the test binaries compile in unity batches
// (tests/CMakeLists.txt), where file-local names of two files would meet.
namespace tiktoken_oracle_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPackageVersion = "1.0.22";
constexpr uint64_t kCorpusSeed = 20240917;
constexpr size_t kCorpusSize = 24000;

struct Oracle : test::NodeOracle {
  std::vector<std::string> corpus;
  std::vector<std::string> special_texts;
};

const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle o;
    o.corpus = test::oracle_corpus(kCorpusSeed, kCorpusSize);
    o.special_texts = test::oracle_special_texts();
    const json request = {{"k3_pattern", kK3Pattern}, {"corpus", o.corpus}, {"special_texts", o.special_texts}};
    static_cast<test::NodeOracle&>(o) = test::run_node_oracle(
        fs::path(test::deltafin_binary()).parent_path().string() + "/tiktoken-oracle", {{"tiktoken", kPackageVersion}},
        test::source_dir() + "/tests/tokenizer/oracle/oracle.mjs", request.dump());
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
      if (::deltafin::test::under_ci()) FAIL() << "tiktoken oracle unavailable under CI: " << oracle().why_not; \
      GTEST_SKIP() << "\n*** SKIPPED: tiktoken oracle unavailable (" << oracle().why_not          \
                   << ")\n*** the tokenizer has NOT been checked against tiktoken\n";            \
    }                                                                                             \
  } while (0)

std::vector<std::pair<std::string, uint32_t>> special_tokens_of(const std::string& encoding) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (const auto& [spelling, id] : oracle().result["encodings"][encoding]["special_tokens"].items())
    out.emplace_back(spelling, id.get<uint32_t>());
  return out;
}

// The tokenizers, built once: ranks from the rank files the oracle wrote from
// the package's own data, read through our rank-file parser.
const Tokenizer& tokenizer(const std::string& which) {
  static std::map<std::string, Tokenizer> built;
  auto it = built.find(which);
  if (it != built.end()) return it->second;
  std::string encoding = which == "o200k_base+k3_pattern" ? "o200k_base" : which;
  std::vector<std::string> ranks = read_tiktoken_file(oracle().out_dir + "/" + encoding + ".tiktoken");
  std::string pattern = which == "o200k_base+k3_pattern"
                            ? std::string(kK3Pattern)
                            : oracle().result["encodings"][encoding]["pat_str"].get<std::string>();
  return built.emplace(which, Tokenizer::from_parts(std::move(ranks), special_tokens_of(encoding), pattern))
      .first->second;
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

// Encodes the whole corpus with `which` and compares with the oracle's ids,
// string by string; reports the first mismatches with the string, our
// pre-tokenizer pieces and both id lists around the first difference.
void compare_with_oracle(const std::string& which) {
  const Oracle& o = oracle();
  const json& expected = o.result["ids"][which];
  ASSERT_EQ(expected.size(), o.corpus.size());
  const Tokenizer& tok = tokenizer(which);
  auto start = std::chrono::steady_clock::now();
  size_t mismatches = 0, round_trip_failures = 0;
  std::string report;
  for (size_t i = 0; i < o.corpus.size(); ++i) {
    const std::string& text = o.corpus[i];
    std::vector<uint32_t> ours = tok.encode_ordinary(text);
    std::vector<uint32_t> theirs = expected[i].get<std::vector<uint32_t>>();
    if (ours != theirs) {
      if (++mismatches <= 5) {
        size_t at = 0;
        while (at < ours.size() && at < theirs.size() && ours[at] == theirs[at]) ++at;
        std::string pieces;
        for (std::string_view p : tok.pretokenizer().split(text)) {
          if (pieces.size() > 600) {
            pieces += " ...";
            break;
          }
          if (!pieces.empty()) pieces += ' ';
          pieces += escaped(std::string(p));
        }
        report += "\n  string #" + std::to_string(i) + ": " + escaped(text) + "\n    our pieces: " + pieces +
                  "\n    ours:     " + id_window(ours, at) + "\n    tiktoken: " + id_window(theirs, at) +
                  "\n    first difference at id index " + std::to_string(at);
      }
    }
    if (tok.decode(ours) != text) ++round_trip_failures;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ oracle   ] %s: %zu strings, %zu mismatches, our encoding took %.2f s\n", which.c_str(),
              o.corpus.size(), mismatches, seconds);
  EXPECT_EQ(mismatches, 0u) << which << ": ids differ from tiktoken on " << mismatches << " of " << o.corpus.size()
                            << " strings; first ones:" << report;
  EXPECT_EQ(round_trip_failures, 0u) << which << ": decode(encode(x)) != x";
}

TEST(TiktokenOracle, CorpusIsLargeAndVaried) {
  const std::vector<std::string> corpus = test::oracle_corpus(kCorpusSeed, kCorpusSize);
  EXPECT_GE(corpus.size(), 20000u);
  auto count_containing = [&](const std::string& needle) {
    size_t n = 0;
    for (const std::string& s : corpus) n += s.find(needle) != std::string::npos;
    return n;
  };
  EXPECT_GT(count_containing("\r\n"), 100u);
  EXPECT_GT(count_containing("\xc2\x85"), 100u);      // NEL
  EXPECT_GT(count_containing("\xe3\x80\x80"), 100u);  // ideographic space
  EXPECT_GT(count_containing("\xc2\xa0"), 100u);      // no-break space
  EXPECT_GT(count_containing("\xe2\x80\x8d"), 50u);   // ZWJ sequences
  EXPECT_GT(count_containing("'S"), 100u);
  size_t longest = 0;
  for (const std::string& s : corpus) longest = std::max(longest, s.size());
  EXPECT_GE(longest, 18000u);
  EXPECT_EQ(test::oracle_corpus(kCorpusSeed, kCorpusSize), corpus);  // seeded, so reproducible
}

TEST(TiktokenOracle, PackageRankFilesParseAndEveryRankIsConfirmed) {
  REQUIRE_ORACLE();
  const json& r = oracle().result;
  EXPECT_EQ(r["version"], kPackageVersion);
  for (const char* name : {"cl100k_base", "o200k_base"}) {
    const json& e = r["encodings"][name];
    // oracle.mjs checked encode_single_token(bytes of rank k) == k for all k.
    EXPECT_EQ(e["ranks_checked"], e["n_ranks"]) << name;
    EXPECT_EQ(tokenizer(name).num_ranks(), e["n_ranks"].get<uint32_t>()) << name;
  }
  EXPECT_EQ(tokenizer("cl100k_base").num_ranks(), 100256u);
  EXPECT_EQ(tokenizer("o200k_base").num_ranks(), 199998u);
  std::printf("[ oracle   ] tiktoken %s: npm + node %.2f s%s\n", kPackageVersion, oracle().seconds,
              oracle().from_cache ? " (results cached from an earlier run)" : "");
}

TEST(TiktokenOracle, Cl100kBaseWithItsOwnPatternMatchesTiktoken) {
  REQUIRE_ORACLE();
  compare_with_oracle("cl100k_base");
}

TEST(TiktokenOracle, O200kBaseWithItsOwnPatternMatchesTiktoken) {
  REQUIRE_ORACLE();
  compare_with_oracle("o200k_base");
}

TEST(TiktokenOracle, K3PatternTranslationAgreesWithFancyRegex) {
  REQUIRE_ORACLE();
  compare_with_oracle("o200k_base+k3_pattern");
}

TEST(TiktokenOracle, SpecialTokensAreRecognisedLikeTiktoken) {
  REQUIRE_ORACLE();
  const Oracle& o = oracle();
  for (const char* name : {"cl100k_base", "o200k_base"}) {
    const json& expected = o.result["special_ids"][name];
    ASSERT_EQ(expected.size(), o.special_texts.size());
    for (size_t i = 0; i < o.special_texts.size(); ++i)
      EXPECT_EQ(tokenizer(name).encode_with_specials(o.special_texts[i]), expected[i].get<std::vector<uint32_t>>())
          << name << ": " << escaped(o.special_texts[i]);
  }
  // The texts do contain specials: cl100k_base's <|endoftext|> is 100257.
  EXPECT_EQ(tokenizer("cl100k_base").encode_with_specials("<|endoftext|>"), (std::vector<uint32_t>{100257}));
}

}  // namespace
}  // namespace tiktoken_oracle_test
}  // namespace deltafin

#undef REQUIRE_ORACLE  // file-local: the test binaries compile in unity batches
