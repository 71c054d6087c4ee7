// `deltafin tokenize` end to end on a model directory with a hand-built
// vocabulary (the same one as tokenizer_test.cpp: "hello" = 259,
// " world" = 263, <|open|> = 267).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/tiktoken_file.h"
#include "format/tokenizer_config.h"
#include "support/test_support.h"

namespace deltafin {
namespace {

class TokenizeCommand : public ::testing::Test {
protected:
  void SetUp() override {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* m : {"he", "ll", "llo", "hello", " w", "or", " wor", " world"}) tokens.push_back(m);
    test::write_bytes(dir_.file("tiktoken.model"), format_tiktoken_ranks(tokens));
    test::write_bytes(dir_.file("tokenizer_config.json"), make_tokenizer_config_json(264, 4096));
  }
  int run(const std::string& args, std::string* out) {
    return test::run_command(test::deltafin_binary() + " tokenize --model " + dir_.path() + " " + args, out);
  }
  test::TempDir dir_;
};

TEST_F(TokenizeCommand, PrintsIds) {
  std::string out;
  ASSERT_EQ(run("--text 'hello world'", &out), 0) << out;
  EXPECT_EQ(out, "259 263\n");
  ASSERT_EQ(run("--json --text 'hello world'", &out), 0) << out;
  EXPECT_EQ(out, "[259,263]\n");
}

TEST_F(TokenizeCommand, SpecialsOnlyWhenAsked) {
  std::string out;
  ASSERT_EQ(run("--specials --text 'a<|open|>b'", &out), 0) << out;
  EXPECT_EQ(out, "97 267 98\n");
  ASSERT_EQ(run("--text 'a<|open|>b'", &out), 0) << out;
  EXPECT_EQ(out, "97 60 124 111 112 101 110 124 62 98\n");
}

TEST_F(TokenizeCommand, ErrorsNameTheProblem) {
  std::string out;
  EXPECT_EQ(test::run_command(test::deltafin_binary() + " tokenize --model " + dir_.path() + "/nowhere --text x", &out), 1);
  EXPECT_NE(out.find("nowhere/tiktoken.model"), std::string::npos) << out;
  EXPECT_NE(run("", &out), 0);  // --text is required
  EXPECT_NE(out.find("--text"), std::string::npos) << out;
}

}  // namespace
}  // namespace deltafin
