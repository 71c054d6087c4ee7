// The binary on a Qwen3-MoE checkpoint (make-model --arch qwen3_moe): inspect
// describes it, logits are the same one position at a time as all at once,
// run generates and speculation (n-gram, the replay oracle) prints exactly
// plain decoding's tokens; a chat renders through Qwen3's template and ends
// at <|im_end|>; prompt states kept on disk make a second run restore the
// prompt's whole blocks and print the same text. (serve: tests/server.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tokenizer/hf_tokenizer.h"
#include "util/file.h"

using namespace deltafin;

namespace {

using test::df;

const std::string& qwen3_moe_model() {
  static test::TempDir dir;
  static const std::string path = [] {
    std::string out;
    const std::string p = dir.path() + "/q";
    if (test::run_command(df("make-model --arch qwen3_moe --preset tiny --seed 3 --out " + p), &out) != 0)
      throw std::runtime_error("make-model failed: " + out);
    return p;
  }();
  return path;
}

}  // namespace

TEST(Qwen3MoeCli, MakeModelWritesTheHuggingFaceLayoutAndInspectDescribesIt) {
  const std::string& m = qwen3_moe_model();
  EXPECT_TRUE(std::filesystem::exists(m + "/model.safetensors.index.json"));
  EXPECT_TRUE(std::filesystem::exists(m + "/tokenizer.json"));
  std::string out;
  ASSERT_EQ(test::run_command(df("inspect --verify-experts --model " + m), &out), 0) << out;
  EXPECT_NE(out.find("Qwen3-MoE checkpoint"), std::string::npos) << out;
  EXPECT_NE(out.find("layers 3 (3 MoE, 0 dense): EEE"), std::string::npos) << out;
  EXPECT_NE(out.find("record 12288 bytes"), std::string::npos) << out;  // 3 x 32 x 64 x 2
  EXPECT_NE(out.find("1536 B per position"), std::string::npos) << out;  // 3 layers x 64 x 2 x 4
}

TEST(Qwen3MoeCli, LogitsOnePositionAtATimeEqualAllAtOnce) {
  test::TempDir tmp;
  std::string out;
  const std::string base = df("logits --model " + qwen3_moe_model() + " --tokens 5,9,300,17,4,4,8 --out ");
  ASSERT_EQ(test::run_command(base + tmp.file("all.npy"), &out), 0) << out;
  ASSERT_EQ(test::run_command(base + tmp.file("one.npy") + " --step 1", &out), 0) << out;
  EXPECT_EQ(read_text_file(tmp.file("all.npy")), read_text_file(tmp.file("one.npy")));
  EXPECT_NE(read_text_file(tmp.file("all.npy")).find("'shape': (7, 320)"), std::string::npos);
}

TEST(Qwen3MoeCli, SpeculationPrintsPlainDecodingsTokens) {
  test::TempDir tmp;
  std::string out;
  const std::string base = df("run --model " + qwen3_moe_model() +
                              " --prompt 'the river runs through the town and the river runs' --max-new 24 --ignore-eos --stats");
  ASSERT_EQ(test::run_command(base + " --tokens-out " + tmp.file("plain.txt"), &out), 0) << out;
  EXPECT_NE(out.find("generated 24 tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("qwen3_moe; spine bf16; experts resident"), std::string::npos) << out;
  ASSERT_EQ(test::run_command(base + " --draft ngram --tokens-out " + tmp.file("ngram.txt"), &out), 0) << out;
  EXPECT_EQ(read_text_file(tmp.file("ngram.txt")), read_text_file(tmp.file("plain.txt")));
  // The oracle replays the plain run: every draft right, the same tokens.
  ASSERT_EQ(test::run_command(base + " --draft replay:" + tmp.file("plain.txt") + " --draft-k 4 --tokens-out " +
                                  tmp.file("replay.txt"),
                              &out),
            0)
      << out;
  EXPECT_EQ(read_text_file(tmp.file("replay.txt")), read_text_file(tmp.file("plain.txt")));
  EXPECT_NE(out.find("speculation (replay)"), std::string::npos) << out;
}

// A Qwen3 dense draft model with the same tokenizer drafts token-level; one
// with another tokenizer is refused, naming both files.
TEST(Qwen3MoeCli, ADenseDraftModelWithTheSameTokenizerKeepsTheOutput) {
  test::TempDir tmp;
  std::string out;
  ASSERT_EQ(test::run_command(df("make-model --arch qwen3 --vocab 320 --seed 9 --out " + tmp.file("draft")), &out), 0) << out;
  const std::string base = df("run --model " + qwen3_moe_model() + " --prompt 'the river runs through the town' --max-new 16 --ignore-eos");
  ASSERT_EQ(test::run_command(base + " --tokens-out " + tmp.file("plain.txt"), &out), 0) << out;
  ASSERT_EQ(test::run_command(base + " --stats --draft-k 3 --draft model:" + tmp.file("draft") + " --tokens-out " +
                                  tmp.file("draft.txt"),
                              &out),
            0)
      << out;
  EXPECT_EQ(read_text_file(tmp.file("draft.txt")), read_text_file(tmp.file("plain.txt")));
  EXPECT_NE(out.find("speculation (model)"), std::string::npos) << out;
  EXPECT_EQ(out.find("0 verification rounds"), std::string::npos) << out;  // it drafted
  ASSERT_EQ(test::run_command(df("make-model --arch qwen3 --vocab 400 --out " + tmp.file("other")), &out), 0) << out;
  EXPECT_EQ(test::run_command(base + " --draft model:" + tmp.file("other"), &out), 1);
  EXPECT_NE(out.find("differs from the target's"), std::string::npos) << out;
}

TEST(Qwen3MoeCli, ChatAndPromptStatesOnDiskWork) {
  std::string out;
  test::TempDir tmp;
  ASSERT_EQ(test::run_command(df("run --model " + qwen3_moe_model() + " --chat --no-thinking --prompt hi --max-new 4 "
                                 "--tokens-out " + tmp.file("chat.ids")),
                              &out),
            0)
      << out;
  EXPECT_FALSE(read_text_file(tmp.file("chat.ids")).empty());
  // A prompt of more than one 256-token block: the second run restores the
  // first block from disk and generates the same tokens.
  std::string prompt;
  for (int i = 0; i < 80; ++i) prompt += "word" + std::to_string(i) + " ";
  const std::string base = df("run --model " + qwen3_moe_model() + " --prompt '" + prompt +
                              "' --max-new 6 --stats --prompt-cache-dir " + tmp.file("states"));
  std::string first, second;
  ASSERT_EQ(test::run_command(base + " --tokens-out " + tmp.file("a.ids"), &first), 0) << first;
  EXPECT_EQ(first.find("restored from"), std::string::npos) << first;
  ASSERT_EQ(test::run_command(base + " --tokens-out " + tmp.file("b.ids"), &second), 0) << second;
  EXPECT_NE(second.find("prompt cache: 256 of"), std::string::npos) << second;
  EXPECT_EQ(read_text_file(tmp.file("a.ids")), read_text_file(tmp.file("b.ids")));
}

// tokenize on a tokenizer.json directory: plain and special-aware encoding,
// and --chat through Qwen3's template, equal to the template's text encoded
// whole with its special tokens recognised (apply_chat_template's ids).
TEST(Qwen3MoeCli, TokenizeRendersQwen3Chats) {
  const HfTokenizer tok = HfTokenizer::load(qwen3_moe_model() + "/tokenizer.json");
  auto ids = [](const std::string& out) {
    std::vector<uint32_t> v;
    for (const auto& x : nlohmann::json::parse(out)) v.push_back(x.get<uint32_t>());
    return v;
  };
  const std::string base = df("tokenize --model " + qwen3_moe_model() + " --json ");
  std::string out;
  ASSERT_EQ(test::run_command(base + "--chat --text 'Hi there'", &out), 0) << out;
  EXPECT_EQ(ids(out), tok.encode("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", true));
  ASSERT_EQ(test::run_command(base + "--chat --no-thinking --text 'Hi there'", &out), 0) << out;
  EXPECT_EQ(ids(out),
            tok.encode("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", true));
  ASSERT_EQ(test::run_command(base + "--specials --text '<|im_end|>'", &out), 0) << out;
  EXPECT_EQ(out, "[313]\n");  // 320 ids: 311 BPE tokens, then <|endoftext|>, <|im_start|>, <|im_end|>, ...
  ASSERT_EQ(test::run_command(base + "--text '<|im_end|>'", &out), 0) << out;
  EXPECT_EQ(ids(out), tok.encode("<|im_end|>", false));
  ASSERT_EQ(test::run_command(df("tokenize --model " + qwen3_moe_model() + " --chat --render --text hi"), &out), 0);
  EXPECT_EQ(out.rfind("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n\n", 0), 0u) << out;
}

TEST(Qwen3MoeCli, ADenseQwen3CheckpointIsADraftModelNotATarget) {
  std::string out;
  test::TempDir tmp;
  ASSERT_EQ(test::run_command(df("make-model --arch qwen3 --out " + tmp.file("d")), &out), 0) << out;
  EXPECT_EQ(test::run_command(df("run --model " + tmp.file("d") + " --prompt hi"), &out), 1);
  EXPECT_NE(out.find("draft model, not a target"), std::string::npos) << out;
  // --arch takes the registry's family names (and k3 for kimi_k3).
  ASSERT_EQ(test::run_command(df("make-model --arch kimi_k3 --preset tiny --quiet --out " + tmp.file("k")), &out), 0) << out;
  EXPECT_EQ(test::run_command(df("make-model --arch gpt_oss --out " + tmp.file("g")), &out), 1);
  EXPECT_NE(out.find("not a model family (kimi_k3, qwen3_moe, deepseek_v3, qwen3, k3_dspark"), std::string::npos) << out;
}
