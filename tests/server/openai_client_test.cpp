// End-to-end: the OFFICIAL `openai` npm package drives `deltafin serve`.
//
// For each target family, makes a tiny random checkpoint, starts `deltafin serve` on it (port 0, an
// API key, --max-tokens 64) as a child process, and runs
// tests/server/openai/client_test.mjs under node: models, text and chat
// completions (plain and streamed, token-id prompts, stop strings) compared
// with what `deltafin run` / `deltafin tokenize` give, and the error cases
// through the SDK's error classes. What is checked is listed in that script.
//
// The package (pinned in tests/server/openai/package.json) is installed with
// npm into <build dir>/openai-client (server/npm_client.h).
// Without node, or when npm cannot install, the test skips loudly; with
// CI=true it fails instead. The server and node are killed when the test
// ends, however it ends (and by PR_SET_PDEATHSIG if this process dies).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/npm_client.h"
#include "server/serve_process.h"
#include "support/test_support.h"
#include "util/file.h"

namespace deltafin {
// A namespace of its own: the test binaries compile in unity batches
// (tests/CMakeLists.txt), where file-local names of two files would meet.
namespace openai_client_test {
namespace {

using test::ServeProcess;
using test::run_child;
using test::shell_quote;

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kMaxTokens = 64;                            // the server's --max-tokens
constexpr auto kServerStartLimit = std::chrono::seconds(60);
constexpr auto kServerStopLimit = std::chrono::seconds(30);
constexpr auto kNodeLimit = std::chrono::seconds(600);



test::NpmClient install_client() {
  return test::install_npm_client("openai", "openai", {"client_test.mjs", "tool_calls_test.mjs"});
}

// A target family and what the script checks it against, worked out by hand.
struct FamilyCase {
  const char* family;
  // Session bytes per position of the tiny preset: K3's latent MLA cache
  // (k3-model.md §7.4; 480 B for the tiny preset's MLA layers), Qwen3-MoE's
  // fp32 K and V of 3 layers x 2 KV heads x 32 dims: 3 x 64 x 2 x 4 = 1,536 B.
  int64_t bytes_per_position;
};

class OpenAIClient : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(OpenAIClient, OfficialSdkDrivesServe) {
  const FamilyCase& fc = GetParam();
  const test::NpmClient client = install_client();
  if (!client.ok) {
    if (test::under_ci()) FAIL() << "the openai npm package is unavailable under CI: " << client.why_not;
    GTEST_SKIP() << "\n*** SKIPPED: the openai npm package is unavailable (" << client.why_not
                 << ")\n*** `deltafin serve` has NOT been checked against the official OpenAI client\n";
  }
  std::printf("[ openai   ] openai %s %s in %.1f s\n", client.version.c_str(),
              client.reused ? "reused" : "installed", client.install_seconds);

  test::TempDir dir;
  const std::string model_name = std::string("tiny-") + fc.family;
  const std::string model_dir = dir.file(model_name);
  std::string out;
  ASSERT_EQ(test::run_command(shell_quote(test::deltafin_binary()) + " make-model --arch " + fc.family +
                                  " --preset tiny --out " + shell_quote(model_dir) + " --quiet",
                              &out),
            0)
      << out;

  const std::string api_key = "test-key";
  // A 6 MB session budget: the context (~1,000-3,000 positions) is what it holds,
  // which the script checks through /health and a prompt over it.
  ServeProcess server({"--model", model_dir, "--api-key", api_key, "--queue", "4", "--max-tokens", std::to_string(kMaxTokens),
                       "--session-budget-mb", "6"},
                      {}, kServerStartLimit);
  ASSERT_TRUE(server.error().empty()) << server.error() << "; its output:\n" << server.output();

  const auto start = Clock::now();
  std::string node_out;
  const int status = run_child({"node", client.scripts[0]},
                               {"DELTAFIN_TEST_BASE_URL=" + server.base_url(), "DELTAFIN_TEST_API_KEY=" + api_key,
                                "DELTAFIN_TEST_MODEL=" + model_name, "DELTAFIN_TEST_MODEL_DIR=" + model_dir,
                                "DELTAFIN_TEST_FAMILY=" + std::string(fc.family),
                                "DELTAFIN_TEST_BYTES_PER_POSITION=" + std::to_string(fc.bytes_per_position),
                                "DELTAFIN_TEST_BINARY=" + test::deltafin_binary(),
                                "DELTAFIN_TEST_MAX_TOKENS=" + std::to_string(kMaxTokens)},
                               &node_out, kNodeLimit);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("[ openai   ] node client_test.mjs: exit %d in %.1f s\n", status, seconds);
  if (status == 0) std::printf("%s", node_out.c_str());  // the list of checks

  const int server_status = server.stop(kServerStopLimit);
  EXPECT_EQ(status, 0) << "node " << client.scripts[0] << " (a copy of tests/server/openai/client_test.mjs) said:\n"
                       << node_out << "\n--- server output ---\n"
                       << server.output();
  EXPECT_EQ(server_status, 0) << "the server did not exit cleanly on SIGTERM; its output:\n" << server.output();
}

// The SDK reading tool calls: a scripted Qwen3-MoE checkpoint answers every
// chat with one get_weather call (tool_calls_test.mjs says what is checked).
TEST(OpenAIClientTools, OfficialSdkReadsAScriptedModelsToolCalls) {
  const test::NpmClient client = install_client();
  if (!client.ok) {
    if (test::under_ci()) FAIL() << "the openai npm package is unavailable under CI: " << client.why_not;
    GTEST_SKIP() << "\n*** SKIPPED: the openai npm package is unavailable (" << client.why_not << ")\n";
  }
  test::TempDir dir;
  const std::string model_dir = dir.file("scripted");
  const std::string arguments = R"({"city": "Paris", "days": 2})";
  const json script = {"<tool_call>", R"({"name": "get_weather", "arguments": )" + arguments + "}", "</tool_call>",
                       "<|im_end|>"};
  std::string out;
  ASSERT_EQ(test::run_command(shell_quote(test::deltafin_binary()) + " make-model --arch qwen3_moe --out " +
                                  shell_quote(model_dir) + " --quiet --script " + shell_quote(script.dump()),
                              &out),
            0)
      << out;
  const std::string api_key = "test-key";
  ServeProcess server({"--model", model_dir, "--api-key", api_key, "--max-tokens", std::to_string(kMaxTokens)}, {},
                      kServerStartLimit);
  ASSERT_TRUE(server.error().empty()) << server.error() << "; its output:\n" << server.output();
  std::string node_out;
  const int status = run_child({"node", client.scripts[1]},
                               {"DELTAFIN_TEST_BASE_URL=" + server.base_url(), "DELTAFIN_TEST_API_KEY=" + api_key,
                                "DELTAFIN_TEST_MODEL=scripted", "DELTAFIN_TEST_CALL_ARGUMENTS=" + arguments},
                               &node_out, kNodeLimit);
  if (status == 0) std::printf("%s", node_out.c_str());
  const int server_status = server.stop(kServerStopLimit);
  EXPECT_EQ(status, 0) << node_out << "\n--- server output ---\n" << server.output();
  EXPECT_EQ(server_status, 0) << server.output();
}

INSTANTIATE_TEST_SUITE_P(Families, OpenAIClient,
                         ::testing::Values(FamilyCase{"kimi_k3", 480}, FamilyCase{"qwen3_moe", 1536}),
                         [](const ::testing::TestParamInfo<FamilyCase>& info) { return std::string(info.param.family); });

}  // namespace
}  // namespace openai_client_test
}  // namespace deltafin
