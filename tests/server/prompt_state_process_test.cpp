// Prompt states on disk through the binary (engine/prompt_disk_cache.h):
// `deltafin run` killed with SIGKILL while it writes a state leaves nothing
// that is used (the next run's output equals a cold run's, and it keeps the
// state whole); and a restarted `deltafin serve` answers a request that
// shares a long prefix with one its predecessor served without recomputing
// those positions, with the same answer as a server that never kept any.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/http_test_client.h"
#include "server/serve_process.h"
#include "support/test_support.h"

namespace deltafin {
// A namespace of its own: the test binaries compile in unity batches
// (tests/CMakeLists.txt), where file-local names of two files would meet.
namespace prompt_state_process_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::Child;
using test::HttpResponse;
using test::ServeProcess;
using Clock = std::chrono::steady_clock;

const std::string& model_dir() { return test::tiny_checkpoint_dir(3); }

std::string ids_text(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (s.empty() ? "" : ",") + std::to_string(100 + (i * 13) % 600);
  return s;
}

std::vector<std::string> states_in(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(suffix) != std::string::npos) out.push_back(e.path().string());
  return out;
}

// stdout of `deltafin run` (stderr separately, via --stats lines in `err`).
int run_deltafin(const std::vector<std::string>& args, std::string* out) {
  std::vector<std::string> argv{test::deltafin_binary(), "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run_child(argv, {}, out, std::chrono::seconds(300));
}

TEST(PromptStateProcess, KillDuringTheWriteLeavesNothingUsedAndTheNextRunIsExact) {
  test::TempDir d;
  const std::string cache = d.file("states");
  const std::string ids = ids_text(256 + 40);
  const std::vector<std::string> common{"--model", model_dir(), "--prompt-ids", ids, "--max-new", "6", "--ignore-eos"};

  std::string cold;
  std::vector<std::string> no_cache = common;
  no_cache.insert(no_cache.end(), {"--prompt-cache-disk-gb", "0"});
  ASSERT_EQ(run_deltafin(no_cache, &cold), 0) << cold;

  // Killed while the state is written (a test hook pauses the write).
  std::vector<std::string> with_cache = common;
  with_cache.insert(with_cache.end(), {"--prompt-cache-dir", cache});
  {
    std::vector<std::string> argv{test::deltafin_binary(), "run"};
    argv.insert(argv.end(), with_cache.begin(), with_cache.end());
    Child c(argv, {"DELTAFIN_TEST_PROMPT_STATE_PAUSE_MS=30000"});
    std::string out;
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (out.find("prompt cache: writing") == std::string::npos && Clock::now() < deadline)
      if (!c.read_some(&out, std::chrono::milliseconds(100))) break;
    ASSERT_NE(out.find("prompt cache: writing"), std::string::npos) << out;
    c.signal(SIGKILL);
    EXPECT_EQ(c.wait_until(Clock::now() + std::chrono::seconds(30)), 128 + SIGKILL);
  }
  EXPECT_EQ(states_in(cache, ".tmp-").size(), 1u);
  EXPECT_TRUE(states_in(cache, ".state").size() == states_in(cache, ".tmp-").size());  // only the temporary

  // The next run: the same output as the cold one; the temporary is gone and
  // the state is kept whole.
  std::string second;
  ASSERT_EQ(run_deltafin(with_cache, &second), 0) << second;
  EXPECT_EQ(second, cold);
  EXPECT_TRUE(states_in(cache, ".tmp-").empty());
  ASSERT_EQ(states_in(cache, ".state").size(), 1u);

  // And the one after restores it, with the same output again.
  std::string third;
  std::vector<std::string> stats = with_cache;
  stats.push_back("--stats");
  ASSERT_EQ(run_deltafin(stats, &third), 0) << third;
  EXPECT_NE(third.find("prompt cache: 256 of 296 prompt tokens restored"), std::string::npos) << third;
  EXPECT_NE(third.find(cold.substr(0, cold.size() - 1)), std::string::npos) << "cold:\n" << cold << "\nrestored:\n" << third;
}

json post_json(int port, const json& body) {
  const HttpResponse r = test::http_call(port, "POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json();
}

TEST(PromptStateProcess, ARestartedServerReusesASharedPrefixFromDisk) {
  test::TempDir d;
  const std::string cache = d.file("states");
  // Two prompts sharing 1,100 tokens (4 whole blocks: 1,024), then different.
  auto prompt = [](uint32_t tail) {
    json ids = json::array();
    for (uint32_t i = 0; i < 1100; ++i) ids.push_back(100 + (i * 13) % 600);
    for (uint32_t i = 0; i < 30; ++i) ids.push_back(100 + (i * 7 + tail) % 600);
    return json{{"model", "tiny"}, {"prompt", ids}, {"max_tokens", 8}};
  };
  const std::vector<std::string> args{"--model", model_dir(), "--served-model-name", "tiny", "--prompt-cache-dir", cache};

  json want_b;
  {
    ServeProcess cold({"--model", model_dir(), "--served-model-name", "tiny", "--prompt-cache-disk-gb", "0"});
    ASSERT_TRUE(cold.error().empty()) << cold.error() << cold.output();
    want_b = post_json(cold.port(), prompt(2));
    EXPECT_EQ(cold.stop(), 0);
  }
  {
    ServeProcess first(args);
    ASSERT_TRUE(first.error().empty()) << first.error() << first.output();
    const json a = post_json(first.port(), prompt(1));
    EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(first.stop(), 0);
  }
  ASSERT_EQ(states_in(cache, ".state").size(), 1u);
  ServeProcess second(args);
  ASSERT_TRUE(second.error().empty()) << second.error() << second.output();
  const auto t = Clock::now();
  const json b = post_json(second.port(), prompt(2));
  const double warm_s = std::chrono::duration<double>(Clock::now() - t).count();
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], 1024);
  EXPECT_EQ(b["choices"], want_b["choices"]);
  EXPECT_EQ(b["usage"]["completion_tokens"], want_b["usage"]["completion_tokens"]);
  const json health = test::http_call(second.port(), "GET", "/health").json();
  EXPECT_EQ(health["prompt_cache"]["disk"]["hits"], 1) << health.dump();
  // The request's log line is on the server's stderr before its answer, but
  // the pipe is read by another thread: wait for it rather than race it.
  EXPECT_TRUE(second.wait_for_output("(1024 reused, 1024 of them from disk)", std::chrono::milliseconds(10000)))
      << second.output();
  std::printf("[ figure   ] restarted server: 1,130-token prompt with 1,024 positions from disk answered in %.3f s\n", warm_s);
  EXPECT_EQ(second.stop(), 0);
}

}  // namespace
}  // namespace prompt_state_process_test
}  // namespace deltafin
