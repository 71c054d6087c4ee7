// Byte-pair merging (k3-model.md §8.3) on hand-built rank tables, where every
// expected id sequence follows from the rule "merge the lowest-rank adjacent
// pair, leftmost on ties", and agreement of the heap merge with tiktoken's
// loop on random pieces.
#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin {
namespace {

// The 256 single bytes, then `merges` at ranks 256, 257, ...
RankTable table(const std::vector<std::string>& merges) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const std::string& m : merges) tokens.push_back(m);
  return RankTable(tokens);
}

std::vector<uint32_t> encode(std::string_view piece, const RankTable& t) {
  std::vector<uint32_t> out;
  bpe_encode(piece, t, out);
  return out;
}

TEST(RankTable, FindsByBytes) {
  RankTable t = table({"ab", "abc"});
  EXPECT_EQ(t.size(), 258u);
  EXPECT_EQ(t.find("a"), 97u);
  EXPECT_EQ(t.find(std::string(1, '\0')), 0u);
  EXPECT_EQ(t.find("ab"), 256u);
  EXPECT_EQ(t.find("abc"), 257u);
  EXPECT_EQ(t.find("abcd"), kNoRank);
  EXPECT_EQ(t.find(""), kNoRank);
  EXPECT_EQ(t.bytes(257), "abc");
}

TEST(Bpe, WholePieceLookupComesFirst) {
  // "abc" is a token but neither "ab" nor "bc" is, so merging alone could
  // never reach it; the whole-piece lookup does.
  RankTable t = table({"abc"});
  EXPECT_EQ(encode("abc", t), (std::vector<uint32_t>{256}));
  EXPECT_EQ(encode("abcd", t), (std::vector<uint32_t>{'a', 'b', 'c', 'd'}));
}

TEST(Bpe, LowestRankPairMergesFirst) {
  // ranks: ab 256, bc 257, abc 258, cd 259.
  // "abcd": pairs ab(256) bc(257) cd(259) -> merge ab -> [ab c d];
  // pairs abc(258) cd(259) -> merge abc -> [abc d]; "abcd" is no token.
  RankTable t = table({"ab", "bc", "abc", "cd"});
  EXPECT_EQ(encode("abcd", t), (std::vector<uint32_t>{258, 'd'}));
  // "bcd": pairs bc(257) cd(259) -> [bc d]; "bcd" no token -> done.
  EXPECT_EQ(encode("bcd", t), (std::vector<uint32_t>{257, 'd'}));
  // With cd at a lower rank than bc: "bcd" -> [b cd].
  RankTable u = table({"cd", "bc"});
  EXPECT_EQ(encode("bcd", u), (std::vector<uint32_t>{'b', 256}));
}

TEST(Bpe, LeftmostWinsOnEqualRanks) {
  // "aaa": pairs aa@0 and aa@1 both rank 256 -> merge at 0 -> [aa a].
  RankTable t = table({"aa"});
  EXPECT_EQ(encode("aaa", t), (std::vector<uint32_t>{256, 'a'}));
  EXPECT_EQ(encode("aaaaa", t), (std::vector<uint32_t>{256, 256, 'a'}));
  // With aaa available: "aaaa" -> [aa a a] -> pairs aaa(257)@0, aa(256)@1 ->
  // merge aa@1 -> [aa aa]; "aaaa" no token.
  RankTable u = table({"aa", "aaa"});
  EXPECT_EQ(encode("aaaa", u), (std::vector<uint32_t>{256, 256}));
  EXPECT_EQ(encode("aaaaa", u), (std::vector<uint32_t>{256, 257}));  // [aa aa a] -> aa+a at 2 -> [aa aaa]
}

TEST(Bpe, BothStrategiesGiveTheSameMerges) {
  // Random rank tables over a 3-letter alphabet (merges built from earlier
  // tokens, like a trained vocabulary) and random pieces up to 300 bytes.
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::string> merges;
    std::vector<std::string> pool = {"a", "b", "c"};
    while (merges.size() < 60) {
      std::string m = pool[next(pool.size())] + pool[next(pool.size())];
      bool known = m.size() == 1;
      for (const std::string& x : merges) known = known || x == m;
      if (known || m.size() > 12) continue;
      merges.push_back(m);
      pool.push_back(m);
    }
    RankTable t = table(merges);
    for (int k = 0; k < 50; ++k) {
      std::string piece;
      size_t len = 1 + next(300);
      for (size_t i = 0; i < len; ++i) piece += static_cast<char>('a' + next(3));
      ASSERT_EQ(bpe_merge_simple(piece, t), bpe_merge_heap(piece, t)) << "piece " << piece;
    }
  }
}

TEST(Bpe, LongPieceTakesLinearWork) {
  // 25,000 bytes, the longest piece the long-input guard allows.
  RankTable t = table({"ab", "abab", "ba", "abababab", "abc"});
  std::string piece;
  for (int i = 0; i < 12500; ++i) piece += "ab";
  // ab(256) pairs everywhere, then abab(257), then abababab(259): 12500 / 4 = 3125 tokens.
  EXPECT_EQ(encode(piece, t), std::vector<uint32_t>(3125, 259));
  // The heap merge ranks each adjacent pair once at the start (n - 1) and
  // then at most the two pairs a merge changes (n - 3125 merges), and pops
  // at most what it pushed: linear in the piece (times the heap's log),
  // where tiktoken's loop scans every remaining pair for the lowest after
  // each merge. Counted through the same merge with tiktoken's priority (the
  // rank of the joined bytes) given by the caller. Its speed, and the loop's,
  // are measured by bench_bpe (bench/results/2026-12-04-bpe.md), not here.
  size_t ranked = 0;
  const std::vector<uint32_t> ids = bpe_merge_heap_pairs(piece, t, [&](std::string_view left, std::string_view right) {
    ++ranked;
    return t.find(std::string(left) + std::string(right));
  });
  EXPECT_EQ(ids, std::vector<uint32_t>(3125, 259));
  const size_t n = piece.size();
  EXPECT_LE(ranked, (n - 1) + 2 * (n - 3125));
}

}  // namespace
}  // namespace deltafin
