// Admission by time, in process (Engine + ApiServer on a free port): a
// request whose estimated prefill exceeds --max-prefill-seconds gets 400
// prefill_too_long naming its tokens, the estimate and the limit, on the
// OpenAI routes in their shape and on /v1/messages in Anthropic's; a short
// one is served, and so is a long one whose kept prefix leaves little to
// prefill; /health shows the estimate; a 429 tells the line's estimate.
//
// The in-process tests do not depend on this machine's speed: the engine's
// rates are fixed through EngineTestHooks (1 s per position, nothing per
// pair), so a prompt of n new positions is estimated at exactly n seconds,
// against a limit of 500 s. The one test of the binary's defaults (its own
// calibration) sends the 1 MB message, whose estimate is some
// 80 to 350 times the default limit on this machine (13 h to 58 h measured).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "server/in_process_server.h"
#include "server/serve_process.h"
#include "util/error.h"

namespace deltafin {
namespace {

using test::HttpConnection;
using test::HttpResponse;
using test::http_request_text;
using test::post;
using test::TestServer;
using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr double kLimit = 500;  // seconds; each position costs 1 s

// A server whose prefill estimate is n seconds for n new positions.
struct TimedServer {
  explicit TimedServer(double limit = kLimit, size_t queue = 8) : s({}, options(limit, queue)) {
    s.service().set_test_hooks({.prefill_seconds_per_position = 1});
  }
  static ServerOptions options(double limit, size_t queue) {
    ServerOptions o;
    o.max_prefill_seconds = limit;
    o.queue = queue;
    return o;
  }
  int port() { return s.port(); }
  TestServer s;
};

json chat_of(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

std::string words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + std::string(i % 2 ? "beta" : "alpha");
  return s;
}

// Prompt tokens of a chat as each route renders it, from a server without
// the limit (count_tokens, for the Messages route, is not admitted by time;
// the chat route's template adds its own lines).
int64_t messages_tokens(int port, const json& messages) {
  const HttpResponse r = post(port, "/v1/messages/count_tokens", json({{"model", "tiny"}, {"messages", messages}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json()["input_tokens"].get<int64_t>();
}
int64_t chat_route_tokens(int unlimited_port, const json& messages) {
  const HttpResponse r =
      post(unlimited_port, "/v1/chat/completions", json({{"model", "tiny"}, {"messages", messages}, {"max_tokens", 1}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json()["usage"]["prompt_tokens"].get<int64_t>();
}

json ids(uint64_t seed, size_t n) {
  json a = json::array();
  for (uint32_t id : test::random_tokens(seed, n, 600)) a.push_back(id + 100);  // ordinary tokens of the tiny vocabulary
  return a;
}

json concat(json a, const json& b) {
  for (const json& x : b) a.push_back(x);
  return a;
}

void expect_names_estimate_and_limit(const std::string& message, int64_t tokens, int64_t reused) {
  EXPECT_NE(message.find(cat(tokens, " tokens (", reused, " of them kept")), std::string::npos) << message;
  EXPECT_NE(message.find(cat("estimated at ", tokens - reused, " s of prefill")), std::string::npos) << message;
  EXPECT_NE(message.find("the limit is 500 s (--max-prefill-seconds)"), std::string::npos) << message;
}

TEST(PrefillAdmission, ChatOverTheLimitIsRefusedOnBothApisAndAShortOneServed) {
  TimedServer s, unlimited(0);
  const json hi = chat_of("Hi there"), long_chat = chat_of(words(150));
  const int64_t chat_short = chat_route_tokens(unlimited.port(), hi), chat_long = chat_route_tokens(unlimited.port(), long_chat);
  const int64_t messages_short = messages_tokens(s.port(), hi), messages_long = messages_tokens(s.port(), long_chat);
  ASSERT_LT(std::max(chat_short, messages_short), kLimit);
  ASSERT_GT(std::min(chat_long, messages_long), kLimit);

  HttpResponse r = post(s.port(), "/v1/chat/completions", json({{"model", "tiny"}, {"messages", hi}, {"max_tokens", 2}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
  r = post(s.port(), "/v1/messages", json({{"model", "tiny"}, {"messages", hi}, {"max_tokens", 2}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;

  for (bool stream : {false, true}) {
    json body = {{"model", "tiny"}, {"messages", long_chat}, {"max_tokens", 2}, {"stream", stream}};
    r = post(s.port(), "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    const json e = r.json();
    ASSERT_TRUE(test::is_openai_error(e)) << r.body;
    EXPECT_EQ(e["error"]["code"], "prefill_too_long");
    EXPECT_EQ(e["error"]["param"], "messages");
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    expect_names_estimate_and_limit(e["error"]["message"], chat_long, 0);

    r = post(s.port(), "/v1/messages", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    const json a = r.json();
    EXPECT_EQ(a.size(), 2u) << r.body;  // Anthropic's shape: {"type": "error", "error": {"type", "message"}}
    EXPECT_EQ(a["type"], "error");
    EXPECT_EQ(a["error"].size(), 2u) << r.body;
    EXPECT_EQ(a["error"]["type"], "invalid_request_error");
    expect_names_estimate_and_limit(a["error"]["message"], messages_long, 0);
  }
  // Refused requests are not generated: the two short ones only.
  EXPECT_EQ(s.s.service().totals().requests, 2);
}

TEST(PrefillAdmission, AKeptPrefixIsNotCountedAndZeroMeansNoLimit) {
  TimedServer s;
  const json first = ids(1, 450), more = concat(first, ids(2, 100)), fresh = ids(3, 550);
  auto complete = [&](int port, const json& prompt) {
    return post(port, "/v1/completions", json({{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 2}}).dump());
  };
  HttpResponse r = complete(s.port(), first);  // 450 s: under the limit
  ASSERT_EQ(r.status, 200) << r.body;
  // 550 tokens, 449 of them kept from the first request: 101 s.
  r = complete(s.port(), more);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 449);
  // 550 tokens, none kept: 550 s.
  r = complete(s.port(), fresh);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["code"], "prefill_too_long");
  EXPECT_EQ(r.json()["error"]["param"], "prompt");
  expect_names_estimate_and_limit(r.json()["error"]["message"], 550, 0);

  TimedServer unlimited(0);
  r = complete(unlimited.port(), fresh);
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(PrefillAdmission, HealthShowsTheEstimate) {
  TimedServer s;
  const json h = s.s.health()["prefill_estimate"];
  EXPECT_EQ(h["source"], "fixed");
  EXPECT_EQ(h["seconds_per_position"], 1.0);
  EXPECT_EQ(h["seconds_per_pair"], 0.0);
  EXPECT_EQ(h["prompt_1k_seconds"], 1000.0);
  EXPECT_EQ(h["prompt_32k_seconds"], 32000.0);
  EXPECT_EQ(h["max_prefill_seconds"], kLimit);
}

// The 429 of a full line says how much estimated prefill it holds: here the
// running request's, as many seconds as its prompt has tokens.
TEST(PrefillAdmission, AFullLineTellsItsEstimatedPrefill) {
  TimedServer s(kLimit, 0);
  s.s.service().set_test_hooks({.step_delay_ms = 20, .prefill_seconds_per_position = 1});
  const std::string prompt = "Hello there, how are you";
  const size_t n = s.s.service().text().encode_ordinary(prompt).size();
  const std::string body = json({{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 3000}, {"stream", true}}).dump();
  HttpConnection busy(s.port());  // a minute of tokens unless the server stops first
  ASSERT_TRUE(busy.send(http_request_text("POST", "/v1/completions", body)));
  ASSERT_TRUE(test::eventually([&] { return s.s.health()["generating"] == 1; }, milliseconds(10'000)));
  const HttpResponse r = post(s.port(), "/v1/completions", body);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_NE(r.body.find(cat("with an estimated ", n, " s of prefill among them")), std::string::npos) << r.body;
}

// The hostile client against `serve` as started by a user (its
// calibration, the default limit): the 1 MB message is refused at once,
// naming the default, and a one-word chat is served.
TEST(PrefillAdmission, TheDefaultRefusesAMegabyteMessage) {
  test::ServeProcess p({"--model", test::tiny_checkpoint_dir(1), "--served-model-name", "tiny", "--max-request-bytes",
                        "2000000", "--threads", "1"});
  ASSERT_TRUE(p.error().empty()) << p.error() << p.output();
  std::string text;
  std::mt19937 rng(7);
  const char* w[] = {"alpha", "beta", "gamma", "river", "stone", "cloud", "seven", "north"};
  while (text.size() < 1'000'000) text += std::string(w[rng() % 8]) + " ";
  HttpResponse r = post(p.port(), "/v1/chat/completions",
                        json({{"model", "tiny"}, {"messages", chat_of(text)}, {"max_tokens", 4}}).dump());
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 400);
  EXPECT_EQ(r.json()["error"]["code"], "prefill_too_long");
  EXPECT_NE(r.body.find("the limit is 600 s (--max-prefill-seconds)"), std::string::npos) << r.body.substr(0, 400);
  r = post(p.port(), "/v1/chat/completions", json({{"model", "tiny"}, {"messages", chat_of("Hi")}, {"max_tokens", 4}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const json h = test::http_call(p.port(), "GET", "/health").json()["prefill_estimate"];
  EXPECT_EQ(h["calibration_samples"], 2) << h.dump();
  EXPECT_GT(h["prompt_32k_seconds"].get<double>(), h["prompt_1k_seconds"].get<double>()) << h.dump();
  EXPECT_EQ(p.stop(), 0);
}

}  // namespace
}  // namespace deltafin
