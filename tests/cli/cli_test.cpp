// The deltafin binary end to end: each subcommand on a generated checkpoint,
// and bad input ending in a named error with exit status 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "server/serve_process.h"
#include "support/test_support.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

using test::df;

// One tiny checkpoint shared by the tests of this file (generation is cheap,
// but this keeps the binary's runs few).
const std::string& tiny_model() {
  static test::TempDir dir;
  static bool made = false;
  if (!made) {
    std::string out;
    int rc = test::run_command(df("make-model --quiet --preset tiny --seed 5 --out " + dir.path() + "/m"), &out);
    if (rc != 0) throw std::runtime_error("make-model failed: " + out);
    made = true;
  }
  static std::string path = dir.path() + "/m";
  return path;
}

void copy_model(const std::string& from, const std::string& to) {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from)) fs::copy_file(e.path(), fs::path(to) / e.path().filename());
}

}  // namespace

TEST(Cli, InspectDescribesGeneratedModel) {
  std::string out;
  ASSERT_EQ(test::run_command(df("inspect --verify-experts --model " + tiny_model()), &out), 0) << out;
  EXPECT_NE(out.find("K3-architecture checkpoint"), std::string::npos) << out;
  EXPECT_NE(out.find("KKKMKKKMKM"), std::string::npos) << out;  // MLA at 1-based 4, 8, 10
  EXPECT_NE(out.find("record 3264 bytes"), std::string::npos) << out;
}

TEST(Cli, MakeModelRefusesExistingCheckpoint) {
  std::string out;
  EXPECT_EQ(test::run_command(df("make-model --quiet --out " + tiny_model()), &out), 1) << out;
  EXPECT_NE(out.find("--force"), std::string::npos) << out;
}

TEST(Cli, BadConfigFieldIsNamed) {
  test::TempDir tmp;
  copy_model(tiny_model(), tmp.path());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(tmp.file("config.json")));
  j["text_config"]["mla_use_nope"] = false;
  std::ofstream(tmp.file("config.json")) << j.dump();
  std::string out;
  EXPECT_EQ(test::run_command(df("inspect --model " + tmp.path()), &out), 1) << out;
  EXPECT_NE(out.find("config.json"), std::string::npos) << out;
  EXPECT_NE(out.find("text_config.mla_use_nope"), std::string::npos) << out;
}

TEST(Cli, TruncatedShardIsNamed) {
  test::TempDir tmp;
  copy_model(tiny_model(), tmp.path());
  std::string shard = tmp.file("model-00002-of-000003.safetensors");
  ASSERT_TRUE(fs::exists(shard));
  fs::resize_file(shard, fs::file_size(shard) - 100);
  std::string out;
  EXPECT_EQ(test::run_command(df("inspect --model " + tmp.path()), &out), 1) << out;
  EXPECT_NE(out.find("model-00002-of-000003.safetensors"), std::string::npos) << out;
  EXPECT_NE(out.find("outside the data section"), std::string::npos) << out;
}

TEST(Cli, MissingDirectoryIsNamed) {
  std::string out;
  EXPECT_EQ(test::run_command(df("inspect --model /nonexistent/deltafin-model"), &out), 1) << out;
  EXPECT_NE(out.find("/nonexistent/deltafin-model"), std::string::npos) << out;
}

TEST(Cli, TokenizeChatKeepsUserSpecialsOrdinary) {
  std::string out;
  ASSERT_EQ(test::run_command(df("tokenize --json --chat --model " + tiny_model() +
                                 " --text 'Hello <|open|> & goodbye'"), &out), 0) << out;
  std::vector<uint32_t> ids = nlohmann::json::parse(out).get<std::vector<uint32_t>>();
  // Tiny: 512 ranks, so <|open|> = 515, <|sep|> = 517, <|end_of_msg|> = 514. As in the
  // spec's G1: four control opens (effort system message, user, assistant, think); the
  // user's literal "<|open|>" is ordinary BPE.
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 515u), 4);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 514u), 2);  // one per finished message
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.back(), 517u);   // ... <|open|>think<|sep|>
  EXPECT_EQ(ids.front(), 515u);  // no BOS is ever prepended
  // The effort takes OpenAI's levels, as the API does: "medium" renders as
  // K3's "high" (§9.2 has no medium), and an unknown level is refused.
  std::string medium, high;
  ASSERT_EQ(test::run_command(df("tokenize --chat --reasoning-effort medium --model " + tiny_model() + " --text hi"), &medium), 0);
  ASSERT_EQ(test::run_command(df("tokenize --chat --reasoning-effort high --model " + tiny_model() + " --text hi"), &high), 0);
  EXPECT_EQ(medium, high);
  EXPECT_NE(test::run_command(df("tokenize --chat --reasoning-effort huge --model " + tiny_model() + " --text hi"), &out), 0);
}

TEST(Cli, LogitsWritesNpyOfEveryPosition) {
  test::TempDir tmp;
  std::string out;
  ASSERT_EQ(test::run_command(df("logits --model " + tiny_model() + " --tokens 1,2,3 --out " + tmp.file("l.npy")), &out), 0)
      << out;
  std::string bytes;
  {
    std::ifstream in(tmp.file("l.npy"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 128u);
  EXPECT_NE(bytes.find("'shape': (3, 768)"), std::string::npos);
  const size_t header = 10 + (static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8));
  EXPECT_EQ(bytes.size(), header + 3 * 768 * 4);
  // Bad token lists are named.
  EXPECT_EQ(test::run_command(df("logits --model " + tiny_model() + " --tokens 1,x --out " + tmp.file("b.npy")), &out), 1);
  EXPECT_NE(out.find("'x'"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(df("logits --model " + tiny_model() + " --tokens 768 --out " + tmp.file("b.npy")), &out), 1);
  EXPECT_NE(out.find("outside the vocabulary"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(tmp.file("b.npy")));
}

TEST(Cli, RunGeneratesAndReportsStats) {
  std::string out;
  ASSERT_EQ(test::run_command(df("run --model " + tiny_model() + " --prompt 'The capital of France is' --max-new 8 --stats"), &out), 0)
      << out;
  EXPECT_NE(out.find("prefill"), std::string::npos) << out;
  EXPECT_NE(out.find("generated 8 tokens; stopped: max-new reached"), std::string::npos) << out;
  EXPECT_NE(out.find("tokens/s"), std::string::npos) << out;
  // Deterministic: the same command prints the same text.
  std::string first, second;
  const std::string cmd = df("run --model " + tiny_model() + " --prompt 'The capital of France is' --max-new 8");
  ASSERT_EQ(test::run_command(cmd, &first), 0) << first;
  ASSERT_EQ(test::run_command(cmd, &second), 0) << second;
  EXPECT_EQ(first, second);
}

// The session's share of the plan, hand-computed for the tiny preset: its
// MLA layers' latent rows are 480 B per position; --context sets the limit,
// a prompt at it is refused naming the limit, and a budget that holds no
// position is refused at start.
TEST(Cli, RunReportsAndEnforcesTheSessionLimit) {
  std::string out;
  ASSERT_EQ(test::run_command(df("run --model " + tiny_model() + " --prompt hi --max-new 2 --stats --context 300"), &out), 0) << out;
  EXPECT_NE(out.find("480 B per position"), std::string::npos) << out;
  EXPECT_NE(out.find("context limit 300 positions (--context)"), std::string::npos) << out;
  std::string words;
  for (int i = 0; i < 40; ++i) words += "word ";
  EXPECT_EQ(test::run_command(df("run --model " + tiny_model() + " --prompt '" + words + "' --max-new 2 --context 20"), &out), 1);
  EXPECT_NE(out.find("within the context limit of 20 positions"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(df("run --model " + tiny_model() + " --prompt hi --session-budget-mb 0.01"), &out), 1);
  EXPECT_NE(out.find("the session budget of 10000 bytes holds 0 positions"), std::string::npos) << out;
}

// Ctrl-C while tokens are being made: the run stops after the current token,
// prints what it made and exits 130. The signal goes once the first token is
// out: a fixed delay could land in the model's load (slow under the
// sanitizers or on a busy machine), where SIGINT still ends the process at once.
TEST(Cli, RunStopsCleanlyOnCtrlC) {
  test::TempDir dir;
  const std::string err = dir.file("stderr");
  // exec: the shell becomes deltafin, so the signal reaches it; stderr goes to
  // a file, so the pipe carries only the generated text.
  test::Child run({"sh", "-c", "exec " + df("run --model " + tiny_model() +
                                             " --prompt hi --ignore-eos --max-new 100000000") + " 2>" + err});
  std::string out;
  const auto deadline = test::ChildClock::now() + std::chrono::seconds(120);
  while (out.empty() && test::ChildClock::now() < deadline && run.read_some(&out, std::chrono::milliseconds(100))) {
  }
  ASSERT_FALSE(out.empty()) << "no token within 120 s; stderr: " << test::read_bytes(err);
  run.signal(SIGINT);
  while (run.read_some(&out, std::chrono::milliseconds(100)) && test::ChildClock::now() < deadline) {
  }
  const std::optional<int> rc = run.wait_until(deadline);
  ASSERT_TRUE(rc.has_value()) << "still running 120 s after Ctrl-C";
  EXPECT_EQ(*rc, 130) << test::read_bytes(err);
  EXPECT_NE(test::read_bytes(err).find("[interrupted after"), std::string::npos) << test::read_bytes(err);
}
