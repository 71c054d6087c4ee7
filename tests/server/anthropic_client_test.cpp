// End-to-end: the OFFICIAL `@anthropic-ai/sdk` npm package drives `deltafin
// serve`'s Messages API (tests/server/anthropic/messages_test.mjs says what
// is checked): once against a tiny random K3 checkpoint, with the CLI's
// token counts as expectations and keep-alive pings between nearly every
// event, and once against a scripted Qwen3-MoE checkpoint that answers every
// chat with one get_weather call, for real tool_use round trips.
//
// The package (pinned in tests/server/anthropic/package.json) is installed
// with npm into <build dir>/anthropic-client (server/npm_client.h). Without
// node, or when npm cannot install, the test skips loudly; with CI=true it
// fails instead.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/npm_client.h"
#include "server/serve_process.h"
#include "support/test_support.h"

namespace deltafin {
namespace {

using test::ServeProcess;
using test::run_child;
using test::shell_quote;

constexpr auto kServerStartLimit = std::chrono::seconds(60);
constexpr auto kServerStopLimit = std::chrono::seconds(30);
constexpr auto kNodeLimit = std::chrono::seconds(600);

// Makes the model, serves it with `serve_args`, runs the script in `mode`.
void run_script(const std::vector<std::string>& make_args, const std::vector<std::string>& serve_args,
                const std::string& model_name, const std::string& mode, const std::vector<std::string>& extra_env) {
  const test::NpmClient client = test::install_npm_client("anthropic", "@anthropic-ai/sdk", {"messages_test.mjs"});
  if (!client.ok) {
    if (test::under_ci()) FAIL() << "the @anthropic-ai/sdk npm package is unavailable under CI: " << client.why_not;
    GTEST_SKIP() << "\n*** SKIPPED: the @anthropic-ai/sdk npm package is unavailable (" << client.why_not
                 << ")\n*** `deltafin serve` has NOT been checked against the official Anthropic client\n";
  }
  std::printf("[ anthropic ] @anthropic-ai/sdk %s %s in %.1f s\n", client.version.c_str(),
              client.reused ? "reused" : "installed", client.install_seconds);
  test::TempDir dir;
  const std::string model_dir = dir.file(model_name);
  std::string command = shell_quote(test::deltafin_binary()) + " make-model --quiet --out " + shell_quote(model_dir);
  for (const std::string& a : make_args) command += " " + shell_quote(a);
  std::string out;
  ASSERT_EQ(test::run_command(command, &out), 0) << out;

  const std::string api_key = "test-key";
  std::vector<std::string> args = {"--model", model_dir, "--api-key", api_key};
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  ServeProcess server(args, {}, kServerStartLimit);
  ASSERT_TRUE(server.error().empty()) << server.error() << "; its output:\n" << server.output();
  std::vector<std::string> env = {"DELTAFIN_TEST_BASE_URL=" + server.base_url(), "DELTAFIN_TEST_API_KEY=" + api_key,
                                  "DELTAFIN_TEST_MODEL=" + model_name, "DELTAFIN_TEST_MODE=" + mode,
                                  "DELTAFIN_TEST_MODEL_DIR=" + model_dir, "DELTAFIN_TEST_BINARY=" + test::deltafin_binary()};
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::string node_out;
  const auto start = std::chrono::steady_clock::now();
  const int status = run_child({"node", client.scripts[0]}, env, &node_out, kNodeLimit);
  std::printf("[ anthropic ] node messages_test.mjs (%s): exit %d in %.1f s\n", mode.c_str(), status,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (status == 0) std::printf("%s", node_out.c_str());
  const int server_status = server.stop(kServerStopLimit);
  EXPECT_EQ(status, 0) << node_out << "\n--- server output ---\n" << server.output();
  EXPECT_EQ(server_status, 0) << "the server did not exit cleanly on SIGTERM; its output:\n" << server.output();
}

// --keepalive 0.001: every stop check that finds the stream quiet for a
// millisecond sends a ping, so the SDK parses streams full of them.
TEST(AnthropicClient, OfficialSdkDrivesTheMessagesApi) {
  run_script({"--arch", "kimi_k3", "--preset", "tiny"}, {"--max-tokens", "64", "--keepalive", "0.001"}, "tiny-k3", "random",
             {});
}

TEST(AnthropicClient, OfficialSdkReadsAScriptedModelsToolUse) {
  const std::string arguments = R"({"city": "Paris", "days": 2})";
  const nlohmann::json script = {"<tool_call>", R"({"name": "get_weather", "arguments": )" + arguments + "}",
                                 "</tool_call>", "<|im_end|>"};
  run_script({"--arch", "qwen3_moe", "--script", script.dump()}, {"--max-tokens", "64"}, "scripted", "scripted",
             {"DELTAFIN_TEST_CALL_ARGUMENTS=" + arguments});
}

}  // namespace
}  // namespace deltafin
