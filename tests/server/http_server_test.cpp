// The HTTP server end to end, in process: Engine + ApiServer on a
// free port over one tiny generated checkpoint, driven by a raw-socket client
// (http_test_client.h) that sends exactly the bytes a test wants and parses
// the answers itself. Protocol errors, authentication, a client vanishing
// mid-stream and while queued, a burst of clients against the queue, and
// prompt reuse, each against expectations computed independently (the same
// request served alone, or by a server without prompt reuse).
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/generate.h"
#include "engine/speculative_generate.h"
#include "model/kimi_k3/load/loaded_k3.h"
#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/chat/chat_encode.h"
#include "model/kimi_k3/chat/chat_template.h"
#include "engine/engine.h"
#include "server/http_test_client.h"
#include "server/in_process_server.h"
#include "server/shared_test_model.h"
#include "support/family_model.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
using nlohmann::json;
using test::HttpConnection;
using test::HttpResponse;
using test::http_call;
using test::http_request_text;
using test::is_openai_error;
using test::TestServer;
using test::post;
using test::eventually;
using test::scripted_qwen3;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

const char* kModelName = "tiny";

LoadedK3& model() { return test::shared_tiny_model(11); }

std::string completion_body(const std::string& prompt, int max_tokens, bool stream = false) {
  json j = {{"model", kModelName}, {"prompt", prompt}, {"max_tokens", max_tokens}};
  if (stream) j["stream"] = true;
  return j.dump();
}

std::string chat_body(const json& messages, int max_tokens, bool stream = false) {
  json j = {{"model", kModelName}, {"messages", messages}, {"max_tokens", max_tokens}};
  if (stream) {
    j["stream"] = true;
    j["stream_options"] = {{"include_usage", true}};
  }
  return j.dump();
}

const std::string kPrompt = "Hello there, how are you";
const json kChat = json::array({{{"role", "user"}, {"content", "Hi there"}}});

int64_t vm_rss_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

std::string text_of(const HttpResponse& r) { return r.json()["choices"][0]["text"].get<std::string>(); }

// The answer to a completion request served alone, by a server without
// prompt reuse or delays: the independent expectation for the busier tests.
json solo_completion(const std::string& prompt, int max_tokens) {
  EngineSettings so;
  so.prompt_cache_entries = 0;
  TestServer s(so);
  HttpResponse r = post(s.port(), "/v1/completions", completion_body(prompt, max_tokens));
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json();
}

void expect_error_shape(const HttpResponse& r, int status, const std::string& code = "") {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_TRUE(r.complete);
  EXPECT_NE(r.header("Content-Type").find("application/json"), std::string::npos) << r.header("Content-Type");
  const json j = r.json();
  EXPECT_TRUE(is_openai_error(j)) << r.body;
  if (!code.empty() && is_openai_error(j)) {
    EXPECT_EQ(j["error"]["code"], code) << r.body;
  }
}

// The tests that run on every target family: the tiny K3 model above, or a
// tiny Qwen3-MoE one (its chat template, its tokenizer, its sessions).
class HttpFamily : public ::testing::TestWithParam<std::string> {
protected:
  LoadedModel& lm() { return GetParam() == "kimi_k3" ? model() : test::shared_family_model(GetParam(), 11); }
  uint32_t vocab() { return static_cast<uint32_t>(lm().summary().vocab); }
};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Families, HttpFamily, ::testing::ValuesIn(test::target_families()), test::family_name);

// ---------------------------------------------------------------------------
// Protocol and validation, over raw sockets.

TEST(HttpProtocol, MalformedJsonIs400WithOpenAiShape) {
  TestServer s;
  for (const std::string body : {R"({"model": "tiny", "prompt": "x", )", "not json at all", ""}) {
    SCOPED_TRACE(body);
    expect_error_shape(post(s.port(), "/v1/completions", body), 400);
  }
  expect_error_shape(post(s.port(), "/v1/chat/completions", R"({"model": "tiny", "messages": [)"), 400, "invalid_json");
  EXPECT_EQ(s.service().totals().requests, 0);
}

TEST(HttpProtocol, BodyOverTheLimitIs413) {
  ServerOptions o;
  o.max_request_bytes = 4096;
  TestServer s({}, o);
  // Padded with the "user" field, so the prompt stays short.
  auto padded = [](size_t pad) {
    return json{{"model", kModelName}, {"prompt", kPrompt}, {"max_tokens", 2}, {"user", std::string(pad, 'u')}}.dump();
  };
  const std::string big = padded(5000);
  ASSERT_GT(big.size(), 4096u);
  expect_error_shape(post(s.port(), "/v1/completions", big), 413, "request_too_large");
  // Just under the limit, the same server answers.
  const std::string small = padded(4000);
  ASSERT_LE(small.size(), 4096u);
  HttpResponse ok = post(s.port(), "/v1/completions", small);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(s.service().totals().requests, 1);
}

TEST(HttpProtocol, RequestSentByteByByteIsServedLikeOneSentAtOnce) {
  EngineSettings so;
  so.prompt_cache_entries = 0;  // both requests computed from scratch
  TestServer s(so);
  const std::string request = http_request_text("POST", "/v1/completions", completion_body(kPrompt, 4));
  HttpConnection at_once(s.port());
  ASSERT_TRUE(at_once.send(request));
  const HttpResponse a = at_once.read_response();

  HttpConnection slow(s.port());
  ASSERT_TRUE(slow.send_slowly(request, milliseconds(2)));
  const HttpResponse b = slow.read_response();

  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_TRUE(b.complete);
  EXPECT_EQ(a.json()["choices"], b.json()["choices"]);
  EXPECT_EQ(a.json()["usage"], b.json()["usage"]);
  EXPECT_EQ(b.json()["usage"]["completion_tokens"], 4);
}

TEST(HttpProtocol, WrongContentTypeIs415) {
  TestServer s;
  HttpConnection c(s.port());
  ASSERT_TRUE(c.send(http_request_text("POST", "/v1/completions", completion_body(kPrompt, 2), {}, "text/plain")));
  expect_error_shape(c.read_response(), 415, "unsupported_media_type");
  // Parameters after the media type are fine.
  HttpConnection c2(s.port());
  ASSERT_TRUE(c2.send(http_request_text("POST", "/v1/completions", completion_body(kPrompt, 2), {},
                                        "Application/JSON; charset=utf-8")));
  EXPECT_EQ(c2.read_response().status, 200);
}

TEST(HttpProtocol, UnknownEndpointIs404) {
  TestServer s;
  expect_error_shape(http_call(s.port(), "GET", "/nowhere"), 404, "unknown_endpoint");
  expect_error_shape(post(s.port(), "/v1/embeddings", R"({"model":"tiny","input":"x"})"), 404, "unknown_endpoint");
}

TEST(HttpProtocol, GarbageRequestLineIs400) {
  TestServer s;
  HttpConnection c(s.port());
  ASSERT_TRUE(c.send("THIS IS NOT HTTP\r\n\r\n"));
  const HttpResponse r = c.read_response();
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(is_openai_error(r.json())) << r.body;
  EXPECT_EQ(s.health()["status"], "ok");
}

TEST(HttpProtocol, GetOnAPostRouteIs405) {
  TestServer s;
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    SCOPED_TRACE(path);
    expect_error_shape(http_call(s.port(), "GET", path), 405, "method_not_allowed");
  }
}

TEST(HttpProtocol, ApiKey) {
  ServerOptions o;
  o.api_keys = {"sekrit-key"};
  TestServer s({}, o);
  const std::string body = completion_body(kPrompt, 2);
  expect_error_shape(post(s.port(), "/v1/completions", body), 401, "invalid_api_key");
  expect_error_shape(http_call(s.port(), "GET", "/v1/models"), 401, "invalid_api_key");
  expect_error_shape(post(s.port(), "/v1/completions", body, {{"Authorization", "Bearer wrong"}}), 401, "invalid_api_key");
  expect_error_shape(post(s.port(), "/v1/completions", body, {{"Authorization", "sekrit-key"}}), 401, "invalid_api_key");
  EXPECT_EQ(s.service().totals().requests, 0);

  const HttpResponse ok = post(s.port(), "/v1/completions", body, {{"Authorization", "Bearer sekrit-key"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json()["usage"]["completion_tokens"], 2);
  EXPECT_EQ(http_call(s.port(), "GET", "/v1/models", std::nullopt, {{"Authorization", "Bearer sekrit-key"}}).status, 200);
  const HttpResponse health = http_call(s.port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json()["status"], "ok");
}

TEST(HttpProtocol, UnknownModelIs404) {
  TestServer s;
  const HttpResponse r = post(s.port(), "/v1/chat/completions", json{{"model", "gpt-4o"}, {"messages", kChat}}.dump());
  expect_error_shape(r, 404, "model_not_found");
  EXPECT_EQ(r.json()["error"]["param"], "model");
  expect_error_shape(http_call(s.port(), "GET", "/v1/models/gpt-4o"), 404, "model_not_found");
  EXPECT_EQ(s.service().totals().requests, 0);
}

TEST(HttpProtocol, ModelsListsTheServedName) {
  ServerOptions o;
  o.model_name = "my-served-name";
  TestServer s({}, o);
  const HttpResponse r = http_call(s.port(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  const json j = r.json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "my-served-name");
  EXPECT_EQ(j["data"][0]["object"], "model");
  const HttpResponse one = http_call(s.port(), "GET", "/v1/models/my-served-name");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.json()["id"], "my-served-name");
  // The served name is the one requests must use.
  const HttpResponse gen =
      post(s.port(), "/v1/completions", json{{"model", "my-served-name"}, {"prompt", kPrompt}, {"max_tokens", 2}}.dump());
  EXPECT_EQ(gen.status, 200) << gen.body;
  EXPECT_EQ(gen.json()["model"], "my-served-name");
  expect_error_shape(post(s.port(), "/v1/completions", completion_body(kPrompt, 2)), 404, "model_not_found");
}

TEST(HttpProtocol, APortInUseIsAnError) {
  TestServer s;
  ServerOptions o;
  o.port = s.port();
  o.model_name = kModelName;
  o.log_requests = false;
  ApiServer second(s.service(), o);
  EXPECT_THROW(second.bind(), Error);  // not a second listener sharing the port
  HttpConnection c(s.port(), std::chrono::seconds(5));
  ASSERT_TRUE(c.send(http_request_text("GET", "/health", std::nullopt)));
  EXPECT_EQ(c.read_response().status, 200);
}

// Non-blocking connects to 127.0.0.1:port, one socket each.
std::vector<int> start_connects(int port, int n) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
      ::close(fd);
      fds.push_back(-1);
      continue;
    }
    fds.push_back(fd);
  }
  return fds;
}

// How many of `fds` finish their handshake before `limit` (which only bounds
// a hang: they finish at once or, their SYN dropped, not for seconds).
int connected_within(const std::vector<int>& fds, milliseconds limit) {
  std::vector<bool> done(fds.size(), false);
  int ok = 0;
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    std::vector<pollfd> pending;
    for (size_t i = 0; i < fds.size(); ++i)
      if (!done[i] && fds[i] >= 0) pending.push_back({fds[i], POLLOUT, 0});
    if (pending.empty()) break;
    if (::poll(pending.data(), pending.size(), 100) < 0 && errno != EINTR) break;
    for (const pollfd& p : pending) {
      if (p.revents == 0) continue;
      const size_t i = static_cast<size_t>(std::find(fds.begin(), fds.end(), p.fd) - fds.begin());
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      done[i] = true;
      ok += err == 0;
    }
  }
  return ok;
}

// Everything `fd` receives until the peer closes it (or `limit` passes).
std::string read_to_close(int fd, milliseconds limit) {
  std::string got;
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    else if (n == 0 || (errno != EAGAIN && errno != EINTR)) break;
  }
  return got;
}

TEST(HttpProtocol, ABurstOfConnectionsIsAcceptedAtOnce) {
  // More clients than a small listen backlog holds connect together. Until
  // the server accepts them, the kernel queues completed handshakes only as
  // deep as the listen backlog and drops the SYN of any client beyond it (a
  // retransmit after a second, dropped again while the queue stays full):
  // httplib's backlog of 5 did that here. So every handshake must complete
  // before the server accepts a single one: the server under test is bound
  // (listening) but not yet serving.
  TestServer s;  // for its engine
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.model_name = kModelName;
  o.log_requests = false;
  ApiServer burst(s.service(), o);
  const int port = burst.bind();
  constexpr int kClients = 64;
  const std::vector<int> fds = start_connects(port, kClients);
  const int connected = connected_within(fds, milliseconds(20'000));
  if (connected != kClients) {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
    FAIL() << connected << " of " << kClients << " handshakes completed before the server accepted any";
  }
  // Then served: all send before any reads, more connections than HTTP
  // threads, so the later ones are read only once earlier ones are answered.
  std::thread loop([&] { burst.serve(); });
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (int fd : fds)
    if (fd >= 0) {
      EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    }
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i] < 0) continue;
    EXPECT_EQ(read_to_close(fds[i], milliseconds(30'000)).rfind("HTTP/1.1 200 ", 0), 0u) << "client " << i;
    ::close(fds[i]);
  }
  burst.stop();
  loop.join();
}

// ---------------------------------------------------------------------------
// Streaming.

TEST_P(HttpFamily, ChatStreamCarriesTheSameTurnAsTheJsonAnswer) {
  EngineSettings so;
  so.prompt_cache_entries = 0;
  TestServer s(so, {}, &lm());
  const HttpResponse whole = post(s.port(), "/v1/chat/completions", chat_body(kChat, 12));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json msg = whole.json()["choices"][0]["message"];

  HttpConnection c(s.port());
  ASSERT_TRUE(c.send(http_request_text("POST", "/v1/chat/completions", chat_body(kChat, 12, true))));
  HttpResponse head;
  ASSERT_TRUE(c.read_head(head));
  EXPECT_EQ(head.status, 200);
  EXPECT_NE(head.header("Content-Type").find("text/event-stream"), std::string::npos);
  std::vector<json> events;
  bool done = false;
  while (auto e = c.next_event()) {
    if (*e == "[DONE]") {
      done = true;
      break;
    }
    events.push_back(json::parse(*e));
  }
  ASSERT_TRUE(done);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning, content;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json& d = events[i]["choices"][0]["delta"];
    EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  const json& last = events[events.size() - 2];
  EXPECT_EQ(last["choices"][0]["finish_reason"], whole.json()["choices"][0]["finish_reason"]);
  const json& usage = events.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], whole.json()["usage"]);
  EXPECT_EQ(content, msg["content"].get<std::string>());
  EXPECT_EQ(reasoning, msg.value("reasoning_content", std::string()));
}

// A stream quiet for longer than the keep-alive interval (here a prefill of
// ~1,000 positions against a 2 ms interval) carries SSE comments, and the
// events around them are those of a server that sends none. Load only makes
// the prefill slower, so more comments, never fewer.
TEST(HttpStream, AQuietStreamGetsKeepAliveCommentsAndTheSameEvents) {
  std::string prompt;
  for (int i = 0; i < 250; ++i) prompt += "word" + std::to_string(i) + " ";
  auto events_of = [&](int64_t keepalive_ms, std::vector<std::string>* comments) {
    EngineSettings so;
    so.prompt_cache_entries = 0;
    ServerOptions o;
    o.keepalive_ms = keepalive_ms;
    TestServer s(so, o);
    HttpConnection c(s.port());
    EXPECT_TRUE(c.send(http_request_text("POST", "/v1/completions", completion_body(prompt, 4, true))));
    HttpResponse head;
    EXPECT_TRUE(c.read_head(head));
    EXPECT_EQ(head.status, 200);
    std::vector<std::string> events;
    while (std::optional<std::string> e = c.next_event()) events.push_back(json::parse(*e == "[DONE]" ? "null" : *e).dump());
    *comments = c.comments();
    return events;
  };
  std::vector<std::string> none, some;
  const std::vector<std::string> plain = events_of(0, &none);
  const std::vector<std::string> pinged = events_of(2, &some);
  EXPECT_TRUE(none.empty());
  ASSERT_FALSE(some.empty()) << "no keep-alive comment during the prefill";
  // During the prefill the comments give its progress, DONE/TOTAL, DONE
  // never going back; afterwards they are plain keep-alives.
  int64_t last_done = -1, total = -1, progress_comments = 0;
  for (const std::string& c : some) {
    if (c == ": keep-alive") continue;
    long long done = -1, of = -1;
    ASSERT_EQ(std::sscanf(c.c_str(), ": prefill %lld/%lld", &done, &of), 2) << c;
    ++progress_comments;
    EXPECT_GE(done, last_done) << c;
    EXPECT_LE(done, of) << c;
    if (total >= 0) {
      EXPECT_EQ(of, total) << c;
    }
    last_done = done;
    total = of;
  }
  EXPECT_GE(progress_comments, 1) << "no prefill progress during a prefill of ~1,000 positions";
  EXPECT_GT(total, 900);
  ASSERT_EQ(plain.size(), pinged.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    json a = json::parse(plain[i]), b = json::parse(pinged[i]);
    if (a.is_object()) a.erase("created"), a.erase("id"), b.erase("created"), b.erase("id");
    EXPECT_EQ(a, b) << "event " << i;
  }
}

// A streamed request waiting in the queue has its 200 and gets keep-alive
// comments at once (it must not sit on a silent socket behind a long
// generation), then the same events as when served alone.
TEST(HttpStream, AQueuedStreamGetsItsHeadAndKeepAlivesWhileItWaits) {
  const json alone = solo_completion("queued one", 4);
  EngineSettings so;
  ServerOptions o;
  o.keepalive_ms = 30;
  TestServer s(so, o);
  s.service().set_test_hooks({.step_delay_ms = 20});  // tests only: slow the generation down
  HttpConnection busy(s.port());
  ASSERT_TRUE(busy.send(http_request_text("POST", "/v1/completions", completion_body(kPrompt, 3000, true))));
  HttpResponse head;
  ASSERT_TRUE(busy.read_head(head));
  ASSERT_TRUE(busy.next_event().has_value());

  HttpConnection queued(s.port());
  ASSERT_TRUE(queued.send(http_request_text("POST", "/v1/completions", completion_body("queued one", 4, true))));
  HttpResponse queued_head;
  ASSERT_TRUE(queued.read_head(queued_head));  // while the busy one still generates
  EXPECT_EQ(queued_head.status, 200);
  EXPECT_EQ(s.health()["waiting"], 1);
  // Keep-alives arrive while it waits: the next event can only come after
  // the busy request ends, so wait for comments first.
  EXPECT_TRUE(eventually([&] { return queued.poll_comments() >= 3; }, milliseconds(10000)));
  EXPECT_EQ(s.health()["waiting"], 1);
  for (const std::string& c : queued.comments()) EXPECT_EQ(c, ": keep-alive");
  busy.close();

  std::string text;
  std::string finish;
  while (std::optional<std::string> e = queued.next_event()) {
    if (*e == "[DONE]") break;
    const json j = json::parse(*e);
    text += j["choices"][0]["text"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, alone["choices"][0]["text"]);
  EXPECT_EQ(finish, alone["choices"][0]["finish_reason"]);
}

// ---------------------------------------------------------------------------
// Clients that go away.

TEST(HttpDisconnect, ClientGoneMidStreamStopsTheGeneration) {
  const json expected = solo_completion(kPrompt, 5);
  TestServer s;
  s.service().set_test_hooks({.step_delay_ms = 30});  // tests only: slow the generation down
  constexpr int kMaxTokens = 2000;  // a minute at 30 ms a token if nobody stopped it

  HttpConnection c(s.port());
  ASSERT_TRUE(c.send(http_request_text("POST", "/v1/chat/completions", chat_body(kChat, kMaxTokens, true))));
  HttpResponse head;
  ASSERT_TRUE(c.read_head(head));
  ASSERT_EQ(head.status, 200);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.next_event().has_value()) << "event " << i;
  c.close();

  // The server notices and stops the generation short of its 2000 tokens
  // (30 s only bounds a hang: left alone it would run a minute).
  EXPECT_TRUE(eventually([&] { return s.health()["generating"] == 0; }, milliseconds(30'000))) << s.health().dump();
  const int64_t abandoned = s.service().totals().generated_tokens;
  EXPECT_GE(abandoned, 1);  // three events: the role and text of at least one token
  EXPECT_LT(abandoned, kMaxTokens) << "the generation went on after the client left";

  // The next request is served as usual.
  const HttpResponse next = post(s.port(), "/v1/completions", completion_body(kPrompt, 5));
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.json()["choices"], expected["choices"]);
  const auto t = s.service().totals();
  EXPECT_EQ(t.requests, 2);
  EXPECT_EQ(t.generated_tokens, abandoned + 5);
  const json h = s.health();
  EXPECT_EQ(h["generating"], 0);
  EXPECT_EQ(h["waiting"], 0);
}

TEST(HttpDisconnect, ClientGoneWhileQueuedLeavesTheLine) {
  TestServer s;
  s.service().set_test_hooks({.step_delay_ms = 20});  // tests only: slow the generation down
  // A streaming request keeps the generator busy (for a minute, unless it
  // is dropped) until this test is done with the line behind it.
  HttpConnection busy(s.port());
  ASSERT_TRUE(busy.send(http_request_text("POST", "/v1/completions", completion_body(kPrompt, 3000, true))));
  HttpResponse head;
  ASSERT_TRUE(busy.read_head(head));
  ASSERT_EQ(head.status, 200);
  ASSERT_TRUE(busy.next_event().has_value());
  EXPECT_EQ(s.health()["generating"], 1);

  // One plain and one streaming client queue behind it, then vanish (one
  // with an orderly close, one with a reset).
  HttpConnection plain(s.port()), streaming(s.port());
  ASSERT_TRUE(plain.send(http_request_text("POST", "/v1/completions", completion_body("queued one", 5))));
  ASSERT_TRUE(streaming.send(http_request_text("POST", "/v1/chat/completions", chat_body(kChat, 5, true))));
  // (The waits below poll for the state; 30 s only bounds a hang.)
  EXPECT_TRUE(eventually([&] { return s.health()["waiting"] == 2; }, milliseconds(30'000))) << s.health().dump();
  plain.close();
  streaming.close(/*reset=*/true);
  EXPECT_TRUE(eventually([&] { return s.health()["waiting"] == 0; }, milliseconds(30'000))) << s.health().dump();
  // Still the first one generating: the line shrank because they left.
  EXPECT_EQ(s.health()["generating"], 1);
  EXPECT_TRUE(busy.next_event().has_value());
  EXPECT_EQ(s.service().totals().requests, 1);

  busy.close();
  EXPECT_TRUE(eventually([&] { return s.health()["generating"] == 0; }, milliseconds(30'000))) << s.health().dump();
  EXPECT_LT(s.service().totals().generated_tokens, 3000);
  const json h = s.health();
  EXPECT_EQ(h["waiting"], 0);
  EXPECT_EQ(h["refused"], 0);

  // The line works on, and the vanished requests are not in it: the line
  // is first come, first served, so had either stayed, it would be
  // generated before this one is answered.
  const HttpResponse next = post(s.port(), "/v1/completions", completion_body("queued one", 3));
  EXPECT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(s.service().totals().requests, 2) << "a vanished queued request was generated";
}

// ---------------------------------------------------------------------------
// Load: more clients than the line holds.

TEST(HttpLoad, SixteenClientsAgainstAQueueOfFour) {
  constexpr int kClients = 16, kQueue = 4, kTokens = 10;
  const json expected = solo_completion(kPrompt, kTokens);
  ASSERT_EQ(expected["usage"]["completion_tokens"], kTokens) << "the prompt must not end early for this test";
  const std::string expected_text = expected["choices"][0]["text"];

  EngineSettings so;
  ServerOptions o;
  o.queue = kQueue;
  TestServer s(so, o);
  s.service().set_test_hooks({.step_delay_ms = 10});  // tests only: slow the generation down
  const std::string request = http_request_text("POST", "/v1/completions", completion_body(kPrompt, kTokens));

  int64_t rss_after_first = 0;
  for (int burst = 0; burst < 3; ++burst) {
    SCOPED_TRACE("burst " + std::to_string(burst));
    // A streamed request holds the head of the line (3000 tokens: half a
    // minute, unless it is closed), so the whole burst arrives while it runs,
    // however slowly its clients come: four wait, twelve are refused. It is
    // closed once the server reports exactly that, and the four are served.
    HttpConnection busy(s.port());
    ASSERT_TRUE(busy.send(http_request_text("POST", "/v1/completions", completion_body(kPrompt, 3000, true))));
    HttpResponse head;
    ASSERT_TRUE(busy.read_head(head));
    ASSERT_TRUE(busy.next_event().has_value());

    std::vector<HttpResponse> responses(kClients);
    std::barrier start(kClients);
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i)
      clients.emplace_back([&, i] {
        HttpConnection c(s.port());  // connected before the start, so the requests go out together
        start.arrive_and_wait();
        if (c.send(request)) responses[static_cast<size_t>(i)] = c.read_response();
      });
    const int64_t refused_so_far = (burst + 1) * (kClients - kQueue);
    EXPECT_TRUE(eventually(
        [&] {
          const json h = s.health();
          return h["waiting"] == kQueue && h["refused"] == refused_so_far;
        },
        milliseconds(30'000)))  // only bounds a hang
        << s.health().dump();
    busy.close();
    for (auto& t : clients) t.join();

    int ok = 0, refused = 0;
    for (const HttpResponse& r : responses) {
      if (r.status == 200) {
        ++ok;
        EXPECT_EQ(text_of(r), expected_text);
        EXPECT_EQ(r.json()["usage"]["completion_tokens"], kTokens);
      } else if (r.status == 429) {
        ++refused;
        expect_error_shape(r, 429, "queue_full");
        const std::string retry = r.header("Retry-After");
        EXPECT_FALSE(retry.empty());
        EXPECT_GE(std::atoi(retry.c_str()), 1) << retry;
        EXPECT_EQ(r.json()["error"]["type"], "rate_limit_error");
      } else {
        ADD_FAILURE() << "status " << r.status << ": " << r.body;
      }
    }
    EXPECT_EQ(ok, kQueue);
    EXPECT_EQ(refused, kClients - kQueue);
    // The last answer is out just before its request leaves the line.
    EXPECT_TRUE(eventually([&] { return s.health()["generating"] == 0; }, milliseconds(30'000))) << s.health().dump();
    const json h = s.health();
    EXPECT_EQ(h["waiting"], 0);
    EXPECT_EQ(h["refused"], refused_so_far);
    if (burst == 0) rss_after_first = vm_rss_kb();
  }
  const int64_t rss_after_last = vm_rss_kb();
  std::printf("[ rss ] after burst 1: %lld kB, after burst 3: %lld kB\n", static_cast<long long>(rss_after_first),
              static_cast<long long>(rss_after_last));
  ASSERT_GT(rss_after_first, 0);
  EXPECT_LT(rss_after_last - rss_after_first, 64 * 1024) << "VmRSS grew from " << rss_after_first << " kB to "
                                                         << rss_after_last << " kB over two bursts";
  EXPECT_EQ(s.service().totals().requests, 3 * (kQueue + 1));
}

// ---------------------------------------------------------------------------
// Prompt reuse.

TEST_P(HttpFamily, SameCompletionTwiceReusesAllButOnePosition) {
  EngineSettings cold_opts;
  cold_opts.prompt_cache_entries = 0;
  TestServer cold(cold_opts, {}, &lm());
  TestServer warm({}, {}, &lm());
  const std::string body = completion_body(kPrompt, 8);

  const HttpResponse c1 = post(cold.port(), "/v1/completions", body);
  const HttpResponse c2 = post(cold.port(), "/v1/completions", body);
  ASSERT_EQ(c1.status, 200) << c1.body;
  ASSERT_EQ(c2.status, 200) << c2.body;
  EXPECT_EQ(c2.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  const HttpResponse w1 = post(warm.port(), "/v1/completions", body);
  ASSERT_EQ(w1.status, 200) << w1.body;
  const int64_t n = w1.json()["usage"]["prompt_tokens"];
  ASSERT_GE(n, 2);
  EXPECT_EQ(w1.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const auto t1 = warm.service().totals();
  EXPECT_EQ(t1.prefill_positions, n);

  const HttpResponse w2 = post(warm.port(), "/v1/completions", body);
  ASSERT_EQ(w2.status, 200) << w2.body;
  EXPECT_EQ(w2.json()["usage"]["prompt_tokens"], n);
  EXPECT_EQ(w2.json()["usage"]["prompt_tokens_details"]["cached_tokens"], n - 1);
  const auto t2 = warm.service().totals();
  EXPECT_EQ(t2.prefill_positions - t1.prefill_positions, 1);
  EXPECT_EQ(t2.reused_positions - t1.reused_positions, n - 1);

  for (const HttpResponse* r : {&c2, &w1, &w2}) {
    EXPECT_EQ(r->json()["choices"], c1.json()["choices"]);
    EXPECT_EQ(r->json()["usage"]["completion_tokens"], c1.json()["usage"]["completion_tokens"]);
  }
  EXPECT_GE(warm.health()["prompt_cache"]["entries"], 1);
  EXPECT_EQ(cold.health()["prompt_cache"]["entries"], 0);
}

// Tools, tool history, tool_choice and response formats reach K3's template
// exactly: a completion of the renderer's own ids (built here from
// hand-written ChatOptions, k3-model.md §9.6 G2 and G3) leaves a prompt state
// that the chat request then reuses for all but its last position, which
// happens only when the chat rendered to the very same ids.
TEST(HttpTools, ToolRequestsRenderExactlyTheTemplatesTokens) {
  TestServer server;
  const json g2_tools = json::parse(
      R"([{"type":"function","function":{"description":"B tool","name":"beta","parameters":{"z":{"type":"number"},"a":{"type":"string"}}}},)"
      R"({"function":{"name":"alpha","description":"A tool","parameters":{"type":"object"}},"type":"function"}])");
  const json g2_messages = json::parse(
      R"([{"role":"user","content":"Go."},{"role":"assistant","reasoning_content":"Check.","content":"Calling.","tool_calls":[)"
      R"({"id":"b","function":{"name":"beta","arguments":"{\"z\":1,\"a\":\"x\"}"}},)"
      R"({"id":"a","function":{"name":"alpha","arguments":"not valid <|open|>"}}]},)"
      R"({"role":"tool","tool_call_id":"a","name":"stale","content":"alpha result"},)"
      R"({"role":"tool","tool_call_id":"b","tool":"wrong","content":"beta result"}])");
  const json g3_format = json::parse(
      R"({"type":"json_schema","json_schema":{"name":"answer","schema":{"required":["b","a"],"properties":{"b":{"type":"number"},"a":{"type":"string"}},"type":"object"}}})");
  const json g3_messages = json::parse(R"([{"role":"user","name":"A&B\"","content":"Return JSON."}])");
  const json g3_tools = json::parse(R"([{"type":"function","function":{"name":"lookup"}}])");

  struct Case {
    const char* what;
    json body;           // the chat request's extra fields
    ChatOptions options; // what the template must have been given
    json messages;
  };
  auto options = [](const char* effort, const json& tools, const json& choice, const json& format) {
    ChatOptions o;
    o.reasoning_effort = effort;
    o.tools = tools;
    o.tool_choice = choice;
    o.response_format = format;
    return o;
  };
  const std::vector<Case> cases = {
      {"G2: tools and tool history", {{"tools", g2_tools}, {"reasoning_effort", "low"}},
       options("low", g2_tools, nullptr, nullptr), g2_messages},
      {"G3: schema and tool_choice required",
       {{"tools", g3_tools}, {"tool_choice", "required"}, {"response_format", g3_format}, {"reasoning_effort", "high"}},
       options("high", g3_tools, "required", g3_format), g3_messages},
      {"a named tool_choice declares that tool alone and requires a call",
       {{"tools", g2_tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "alpha"}}}}}},
       options("max", json::array({g2_tools[1]}), "required", nullptr), g3_messages},
      {"tool_choice none", {{"tools", g3_tools}, {"tool_choice", "none"}, {"response_format", {{"type", "json_object"}}}},
       options("max", g3_tools, "none", {{"type", "json_object"}}), g3_messages},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::vector<uint32_t> ids = encode_chat_segments(*model().tokenizer, render_chat(c.messages, c.options));
    const HttpResponse warm = post(server.port(), "/v1/completions",
                                   json({{"model", kModelName}, {"prompt", ids}, {"max_tokens", 1}}).dump());
    ASSERT_EQ(warm.status, 200) << warm.body;
    json body = json::parse(chat_body(c.messages, 1));
    body.update(c.body);
    const HttpResponse chat = post(server.port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(chat.status, 200) << chat.body;
    EXPECT_EQ(chat.json()["usage"]["prompt_tokens"], ids.size());
    EXPECT_EQ(chat.json()["usage"]["prompt_tokens_details"]["cached_tokens"], ids.size() - 1);
  }
}

const json kWeatherTools = json::parse(
    R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
const json kWeatherChat = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});

json tools_body(const json& messages, bool stream) {
  json body = json::parse(chat_body(messages, 32, stream));
  body["tools"] = kWeatherTools;
  return body;
}

// The tool calls of a streamed answer, rebuilt from its chunks as OpenAI's
// SDKs do, checking that each call's first piece has id, type and name.
struct StreamedTurn {
  std::string content, finish;
  json calls = json::array();
};
StreamedTurn read_streamed_turn(HttpConnection& c) {
  StreamedTurn t;
  while (std::optional<std::string> e = c.next_event()) {
    if (*e == "[DONE]") break;
    const json j = json::parse(*e);
    if (j["choices"].empty()) continue;  // the usage chunk
    const json& choice = j["choices"][0];
    if (!choice["finish_reason"].is_null()) t.finish = choice["finish_reason"];
    const json& d = choice["delta"];
    if (d.contains("content")) t.content += d["content"].get<std::string>();
    if (!d.contains("tool_calls")) continue;
    for (const json& piece : d["tool_calls"]) {
      const size_t k = piece["index"];
      if (k == t.calls.size()) {
        EXPECT_TRUE(piece.contains("id") && piece["type"] == "function" && piece["function"].contains("name")) << piece;
        t.calls.push_back({{"id", piece["id"]}, {"type", "function"},
                           {"function", {{"name", piece["function"]["name"]}, {"arguments", ""}}}});
      }
      EXPECT_LT(k, t.calls.size()) << piece;
      if (k < t.calls.size() && piece["function"].contains("arguments"))
        t.calls[k]["function"]["arguments"] = t.calls[k]["function"]["arguments"].get<std::string>() +
                                               piece["function"]["arguments"].get<std::string>();
    }
  }
  return t;
}

// A model that answers with a call, served: the call comes back parsed, the
// same streamed and not, and the client's next turn (the call in history, the
// tool's result) is accepted and answered.
TEST(HttpTools, AScriptedModelsToolCallComesBackParsedStreamedAndNot) {
  test::TempDir dir;
  const std::string call_json = R"({"name": "get_weather", "arguments": {"city": "Paris", "days": 2}})";
  std::unique_ptr<LoadedModel> lm = scripted_qwen3(dir, {"<tool_call>", call_json, "</tool_call>", "<|im_end|>"});
  TestServer s({}, {}, lm.get());

  const HttpResponse whole = post(s.port(), "/v1/chat/completions", tools_body(kWeatherChat, false).dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json answer = whole.json();
  const json& choice = answer["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null()) << choice;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice;
  const json call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(whole.json()["usage"]["completion_tokens"], 3);  // <tool_call>, the JSON, </tool_call> (the end token is not counted)

  HttpConnection c(s.port());
  ASSERT_TRUE(c.send(http_request_text("POST", "/v1/chat/completions", tools_body(kWeatherChat, true).dump())));
  HttpResponse head;
  ASSERT_TRUE(c.read_head(head));
  ASSERT_EQ(head.status, 200);
  const StreamedTurn streamed = read_streamed_turn(c);
  EXPECT_EQ(streamed.finish, "tool_calls");
  EXPECT_EQ(streamed.content, "");
  ASSERT_EQ(streamed.calls.size(), 1u);
  EXPECT_EQ(streamed.calls[0]["function"], call["function"]);

  // The round trip: the call in history with its result.
  json history = kWeatherChat;
  history.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
  history.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "Sunny, 21 C"}});
  const HttpResponse next = post(s.port(), "/v1/chat/completions", tools_body(history, false).dump());
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_GT(next.json()["usage"]["prompt_tokens"], whole.json()["usage"]["prompt_tokens"]);
  EXPECT_EQ(next.json()["choices"][0]["finish_reason"], "tool_calls");
}

// Markup the model gets wrong reaches the client as text, whole, with
// finish_reason "stop": arguments that are not JSON, and a block never closed.
TEST(HttpTools, AScriptedModelsMalformedCallsAreShownAsContent) {
  for (const auto& [script, shown] : test::malformed_call_scripts()) {
    SCOPED_TRACE(shown);
    test::TempDir dir;
    std::unique_ptr<LoadedModel> lm = scripted_qwen3(dir, script);
    TestServer s({}, {}, lm.get());
    const HttpResponse r = post(s.port(), "/v1/chat/completions", tools_body(kWeatherChat, false).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json answer = r.json();
    const json& choice = answer["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_EQ(choice["message"]["content"], shown);
    EXPECT_FALSE(choice["message"].contains("tool_calls"));
    HttpConnection c(s.port());
    ASSERT_TRUE(c.send(http_request_text("POST", "/v1/chat/completions", tools_body(kWeatherChat, true).dump())));
    HttpResponse head;
    ASSERT_TRUE(c.read_head(head));
    const StreamedTurn t = read_streamed_turn(c);
    EXPECT_EQ(t.content, shown);
    EXPECT_TRUE(t.calls.empty());
    EXPECT_EQ(t.finish, "stop");
  }
}

TEST_P(HttpFamily, ChatFollowUpReusesTheFirstTurn) {
  EngineSettings cold_opts;
  cold_opts.prompt_cache_entries = 0;
  TestServer cold(cold_opts, {}, &lm());
  TestServer warm({}, {}, &lm());

  const HttpResponse first = post(warm.port(), "/v1/chat/completions", chat_body(kChat, 12));
  ASSERT_EQ(first.status, 200) << first.body;
  const int64_t n1 = first.json()["usage"]["prompt_tokens"];
  const json reply = first.json()["choices"][0]["message"];
  json assistant = {{"role", "assistant"}, {"content", reply["content"]}};
  if (reply.contains("reasoning_content")) assistant["reasoning_content"] = reply["reasoning_content"];
  json follow = kChat;
  follow.push_back(assistant);
  follow.push_back({{"role", "user"}, {"content", "Tell me more."}});

  const auto before = warm.service().totals();
  const HttpResponse warm2 = post(warm.port(), "/v1/chat/completions", chat_body(follow, 12));
  const HttpResponse cold2 = post(cold.port(), "/v1/chat/completions", chat_body(follow, 12));
  ASSERT_EQ(warm2.status, 200) << warm2.body;
  ASSERT_EQ(cold2.status, 200) << cold2.body;
  const json u = warm2.json()["usage"];
  const int64_t n2 = u["prompt_tokens"], cached = u["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(n2, n1);
  EXPECT_GE(cached, n1 - 1);
  EXPECT_LT(cached, n2);
  EXPECT_EQ(warm.service().totals().prefill_positions - before.prefill_positions, n2 - cached);
  EXPECT_EQ(cold2.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(cold2.json()["usage"]["prompt_tokens"], n2);
  EXPECT_EQ(warm2.json()["choices"][0]["message"], cold2.json()["choices"][0]["message"]);
  EXPECT_EQ(warm2.json()["usage"]["completion_tokens"], cold2.json()["usage"]["completion_tokens"]);
}

TEST_P(HttpFamily, SpeculationServesTheSameCompletionAndReusesItsState) {
  // The expected tokens come from the model itself (plain greedy decoding);
  // a replay drafter proposes them (all right), or the first 8 of them and
  // then wrong ones (a replay drafter goes silent once the output leaves its
  // recording, so a partly accepted round comes first). Either way the
  // completion is the one a server without drafting gives,
  // and a follow-up that reuses the speculative request's kept state too.
  LoadedModel& m = lm();
  const std::vector<uint32_t> ids = test::random_tokens(41, 12, vocab());
  std::vector<uint32_t> plain;
  {
    auto s = m.causal().new_session();
    GenerateParams gp;
    gp.max_new = 20;
    gp.ignore_eos = true;
    generate_speculative(m.causal(), *s, ids, gp, SpecParams{}, nullptr, [&](uint32_t t) { plain.push_back(t); });
  }
  test::TempDir dir;
  std::string right, wrong;
  for (size_t i = 0; i < plain.size(); ++i) {
    right += std::to_string(plain[i]) + ",";
    wrong += std::to_string(i < 8 ? plain[i] : (plain[i] + 1) % vocab()) + ",";
  }
  test::write_bytes(dir.file("right.ids"), right);
  test::write_bytes(dir.file("wrong.ids"), wrong);

  const json body = {{"model", kModelName}, {"prompt", ids}, {"max_tokens", 15}};
  EngineSettings none_opts;
  none_opts.draft.kind = DraftSpec::Kind::None;
  none_opts.prompt_cache_entries = 0;
  TestServer none(none_opts, {}, &lm());
  const HttpResponse want = post(none.port(), "/v1/completions", body.dump());
  ASSERT_EQ(want.status, 200) << want.body;
  EXPECT_EQ(none.health()["speculation"]["rounds"], 0);

  for (const std::string file : {"right.ids", "wrong.ids"}) {
    SCOPED_TRACE(file);
    EngineSettings so;
    so.draft.kind = DraftSpec::Kind::Replay;
    so.draft.replay_file = dir.file(file);
    so.draft_k = 4;  // the tiny model is compute-bound: left to adapt, drafting would switch itself off
    TestServer spec(so, {}, &lm());
    const HttpResponse got = post(spec.port(), "/v1/completions", body.dump());
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(got.json()["choices"][0], want.json()["choices"][0]);
    EXPECT_EQ(got.json()["usage"], want.json()["usage"]);
    const json h = spec.health()["speculation"];
    EXPECT_GT(h["rounds"].get<int64_t>(), 0);
    if (file == "right.ids") {
      EXPECT_EQ(h["accepted"], h["drafted"]);
    } else {
      EXPECT_LT(h["accepted"].get<int64_t>(), h["drafted"].get<int64_t>());
    }
    // The kept state holds the prompt and the first 14 of the 15 tokens (the
    // last one was never run): a prompt that extends them reuses all 26.
    std::vector<uint32_t> longer = ids;
    longer.insert(longer.end(), plain.begin(), plain.begin() + 15);
    longer.push_back(5);
    const json body2 = {{"model", kModelName}, {"prompt", longer}, {"max_tokens", 6}};
    const HttpResponse a = post(spec.port(), "/v1/completions", body2.dump());
    const HttpResponse b = post(none.port(), "/v1/completions", body2.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 26);
    EXPECT_EQ(a.json()["choices"][0], b.json()["choices"][0]);
  }
}
