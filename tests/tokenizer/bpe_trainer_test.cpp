// BPE training for generated checkpoints (k3-model.md §14): merges worked out
// by hand on tiny corpora, and a trained 512-rank vocabulary that the
// tokenizer then actually uses.
#include "tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/tiktoken_file.h"
#include "format/tokenizer_config.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace deltafin {
namespace {

const Pretokenizer& k3() {
  static const Pretokenizer p(kK3Pattern);
  return p;
}

std::vector<std::string> merges_of(const std::vector<std::string>& vocab) {
  return std::vector<std::string>(vocab.begin() + 256, vocab.end());
}

TEST(BpeTrainer, SingleBytesComeFirstInByteOrder) {
  std::vector<std::string> vocab = train_bpe("ab ab", 1, k3());
  ASSERT_EQ(vocab.size(), 257u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(vocab[b], std::string(1, static_cast<char>(b)));
}

TEST(BpeTrainer, MostFrequentPairMergesFirst) {
  // Pieces "ab", " ab", " ab": (a,b) occurs 3 times, (' ',a) twice -> "ab".
  // Then (' ', ab) twice -> " ab". Then no pair is left.
  EXPECT_EQ(merges_of(train_bpe("ab ab ab", 2, k3())), (std::vector<std::string>{"ab", " ab"}));
  try {
    train_bpe("ab ab ab", 3, k3());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("supports only 2 merges, 3 were asked for"), std::string::npos) << e.what();
  }
}

TEST(BpeTrainer, TiesGoToTheLowestRankPair) {
  // Pieces "ab", " cd": (a,b)=(97,98), (' ',c)=(32,99), (c,d)=(99,100), once
  // each -> (32,99) " c" = 256. Then (97,98) and (256,100) once each ->
  // (97,98) "ab" = 257. Then " cd" = 258.
  EXPECT_EQ(merges_of(train_bpe("ab cd", 3, k3())), (std::vector<std::string>{" c", "ab", " cd"}));
}

TEST(BpeTrainer, CountsRepeatedPiecesAndMergesWithinPiecesOnly) {
  // Pieces "aa", "\n", "aa", "\n", "aa", " bb": (a,a) 3 times, (b,b) once;
  // "\n" pieces have no pairs and "a\n" never forms across pieces.
  EXPECT_EQ(merges_of(train_bpe("aa\naa\naa bb", 1, k3())), (std::vector<std::string>{"aa"}));
  // "aaaa": left-to-right replacement gives [aa aa] -> next merge "aaaa".
  EXPECT_EQ(merges_of(train_bpe("aaaa", 2, k3())), (std::vector<std::string>{"aa", "aaaa"}));
}

const char* kEnglish =
    "The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran into the forest. "
    "In the forest there were many trees, and the trees were tall and green. Birds sang in the trees all day "
    "long, and the fox listened to the birds while the dog slept in the sun. When the sun went down, the "
    "forest grew quiet, and the animals of the forest went to sleep. The next morning the fox woke early and "
    "went looking for the dog again. It found the dog by the river, drinking the cold clear water. \"Good "
    "morning,\" said the fox. \"Good morning to you,\" said the dog, \"but I am still not amused.\" They "
    "walked along the river together, talking about the weather, the trees, the birds and the water. By noon "
    "they had become friends, and from that day on the fox and the dog were seen together in the forest, by "
    "the river and under the tall green trees, where the birds still sing all day long.\n"
    "Numbers help too: 1, 2, 3, 10, 20, 100 and 2024. Questions? Answers! Some people write code like "
    "`x = y + 1;` or `if (a < b) { return c; }`, and others prefer plain sentences with commas, semicolons; "
    "colons: and dashes - all of which appear here so that the vocabulary learns a little of everything.\n";

TEST(BpeTrainer, TrainedVocabularyIsUsedByTheTokenizer) {
  std::vector<std::string> vocab = train_bpe(kEnglish, 256, k3());
  ASSERT_EQ(vocab.size(), 512u);
  validate_rank_tokens(vocab, "trained vocabulary");
  EXPECT_EQ(train_bpe(kEnglish, 256, k3()), vocab);  // deterministic
  // It is a rank file's content.
  EXPECT_EQ(parse_tiktoken_ranks(format_tiktoken_ranks(vocab), "trained"), vocab);

  Tokenizer t = Tokenizer::from_parts(vocab, k3_special_tokens(512));
  std::string text = kEnglish;
  std::vector<uint32_t> ids = t.encode_ordinary(text);
  EXPECT_LT(ids.size() * 3, text.size()) << ids.size() << " tokens for " << text.size() << " bytes";
  EXPECT_EQ(t.decode(ids), text);
  // Frequent words are single tokens.
  EXPECT_EQ(t.encode_ordinary(" the").size(), 1u);
  EXPECT_EQ(t.encode_ordinary(" forest").size(), 1u);
  // Text the corpus never saw still round-trips through bytes.
  std::string other = "Zebras \xe2\x9c\x93 x9 \xe4\xb8\x96\xe7\x95\x8c!";
  EXPECT_EQ(t.decode(t.encode_ordinary(other)), other);
}

}  // namespace
}  // namespace deltafin
