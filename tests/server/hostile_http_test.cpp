// The built `deltafin serve` binary against hostile and oversized input, as
// bytes on the wire (raw sockets: tests/server/http_test_client.h): invalid
// bytes in the path, model id and headers; bodies over the limit in every
// framing; compressed bodies; headers trickled a byte at a time on many
// connections while /health is timed; header floods; connection floods;
// prompts over the context and the session budget; a client that leaves, and
// SIGTERM, during a long prefill, with the time to stop measured; HTTP/1.0
// streaming; pipelining; Expect: 100-continue.
//
// Every hostile case ends by checking that the server is alive and answers
// the same normal request exactly as it did before the case (its response
// with the id and timestamp taken out). Every response must be a well-formed
// OpenAI error or a success, never a 5xx for bad input. The figures the
// issue asks for (time to stop, /health latency under attack, memory before
// and after floods) are printed as "[ figure ]" lines and recorded in
// bench/results (2026-12-01-serve-hostile.md); the cases assert what the
// server did (answered, refused, stopped inside the prefill), never how
// fast, and wait for states, not for time. Loads are bounded: at most a few
// hundred connections, a few seconds each.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
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
namespace hostile_http_test {
namespace {

using nlohmann::json;
using test::HttpConnection;
using test::HttpResponse;
using test::ServeProcess;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kMaxTokens = 16;
constexpr int kBodyLimit = 65536;      // --max-request-bytes
constexpr int kHeaderTimeoutS = 2;     // --header-timeout
constexpr int kMaxConnections = 96;    // --max-connections
constexpr int kLongPrompt = 16000;     // token ids: a prefill of ~15 s on one core (release), much longer under ASan

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

const std::string& model_dir() { return test::tiny_checkpoint_dir(1); }

std::string completion_body(const std::string& prompt, bool stream = false) {
  json j = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", kMaxTokens}};
  if (stream) j["stream"] = true;
  return j.dump();
}

std::string long_prompt_body(bool stream) {
  json ids = json::array();
  for (int i = 0; i < kLongPrompt; ++i) ids.push_back(100 + (i * 7) % 600);
  json j = {{"model", "tiny"}, {"prompt", ids}, {"max_tokens", 4}};
  if (stream) j["stream"] = true;
  return j.dump();
}

const std::string kPrompt = "The quick brown fox";

// The bytes of one request, as sent.
HttpResponse exchange(int port, const std::string& bytes, milliseconds timeout = milliseconds(30'000)) {
  HttpConnection c(port, timeout);
  if (!c.connected()) return {};
  c.send(bytes);  // may fail half-way when the server refuses early: the answer still comes
  return c.read_response();
}

std::string post_text(const std::string& path, const std::string& body, const std::string& extra_headers = "",
                      const std::string& version = "HTTP/1.1") {
  return "POST " + path + " " + version + "\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A response without what differs between two runs of the same request.
json comparable(const HttpResponse& r) {
  json j = r.json();
  if (j.is_object()) {
    j.erase("id");
    j.erase("created");
  }
  return j;
}

void expect_openai_error(const HttpResponse& r, int status, const std::string& code = "") {
  SCOPED_TRACE("expected " + std::to_string(status) + " " + code);
  EXPECT_EQ(r.status, status) << r.body;
  const json j = r.json();
  EXPECT_TRUE(test::is_openai_error(j)) << "not an OpenAI error body: " << r.body;
  if (!code.empty() && test::is_openai_error(j)) {
    EXPECT_EQ(j["error"]["code"], code) << r.body;
  }
}

// One server for the cases that do not need their own; started once.
class Hostile : public ::testing::Test {
protected:
  // The shared server's options; a case that needs another header deadline
  // starts its own server with it.
  static std::vector<std::string> serve_args(int header_timeout_s = kHeaderTimeoutS) {
    return {"--model", model_dir(), "--served-model-name", "tiny", "--max-tokens", std::to_string(kMaxTokens),
            "--max-request-bytes", std::to_string(kBodyLimit), "--header-timeout", std::to_string(header_timeout_s),
            "--max-connections", std::to_string(kMaxConnections), "--queue", "2", "--prompt-cache-slots", "0",
            "--threads", "1"};
  }
  static void SetUpTestSuite() {
    server_ = new ServeProcess(serve_args());
    if (server_->error().empty()) {
      const HttpResponse r = exchange(server_->port(), post_text("/v1/completions", completion_body(kPrompt)));
      baseline_ = new json(comparable(r));
    }
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->stop(), 0) << server_->output();
    }
    delete server_;
    delete baseline_;
    server_ = nullptr;
    baseline_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->error().empty()) << server_->error() << "\n" << server_->output();
    ASSERT_TRUE(baseline_ && (*baseline_)["choices"].is_array()) << (baseline_ ? baseline_->dump() : "no baseline");
  }
  int port() const { return server_->port(); }

  // Alive, /health answers, and the normal request gets the same answer as before.
  void expect_alive_and_same() { expect_alive_and_same(*server_); }
  void expect_alive_and_same(ServeProcess& s) {
    const HttpResponse h = exchange(s.port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(h.status, 200) << h.body << "\n" << s.output();
    const HttpResponse r = exchange(s.port(), post_text("/v1/completions", completion_body(kPrompt)));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(comparable(r), *baseline_);
    EXPECT_EQ(s.output().find("terminate called"), std::string::npos) << s.output();
  }

  static ServeProcess* server_;
  static json* baseline_;
};
ServeProcess* Hostile::server_ = nullptr;
json* Hostile::baseline_ = nullptr;

// ---------------------------------------------------------------------------
// Bytes.

TEST_F(Hostile, InvalidBytesInPathModelIdAndHeadersAre400sNamingWhere) {
  // A path that percent-decodes to invalid UTF-8 killed the old server
  // (an exception from the JSON library outside any catch), unauthenticated.
  for (const std::string path : {"/v1/models/%ff", "/v1/models/%C3%28", "/%ED%A0%80", "/v1/models/%zz", "/x%4",
                                 "/v1/chat/completions%00"}) {
    const HttpResponse r = exchange(port(), "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_openai_error(r, 400, "invalid_path");
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("path"), std::string::npos) << r.body;
  }
  // A raw non-ASCII byte in the target.
  expect_openai_error(exchange(port(), "GET /v1/models/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n"), 400, "invalid_path");
  // A valid UTF-8 model id that is not served: 404, the id quoted back intact.
  const HttpResponse cafe = exchange(port(), "GET /v1/models/caf%C3%A9 HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_openai_error(cafe, 404, "model_not_found");
  EXPECT_NE(cafe.body.find("caf\xc3\xa9"), std::string::npos) << cafe.body;
  // Invalid UTF-8 as the model in the body: a 400, not a 500.
  expect_openai_error(exchange(port(), post_text("/v1/completions", "{\"model\":\"t\xff\",\"prompt\":\"x\"}")), 400,
                      "invalid_json");
  // Invalid bytes in a Content-Type: 400 naming the header (the old server
  // answered 500); a valid but wrong one is 415.
  const HttpResponse bad_type =
      exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/\xff\xfe\r\n"
                       "Content-Length: 2\r\n\r\n{}");
  expect_openai_error(bad_type, 400, "bad_header");
  EXPECT_NE(bad_type.body.find("content-type"), std::string::npos) << bad_type.body;
  expect_openai_error(exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: text/caf\xc3\xa9\r\n"
                                       "Content-Length: 2\r\n\r\n{}"),
                      415, "unsupported_media_type");
  // Control bytes in a header value, a bad header name, a folded line.
  expect_openai_error(exchange(port(), "GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x01z\r\n\r\n"), 400, "bad_header");
  expect_openai_error(exchange(port(), "GET /health HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n"), 400, "bad_header");
  expect_openai_error(exchange(port(), "GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\n\r\n"), 400,
                      "bad_header");
  // Garbage and an HTTP/2 preface.
  const std::string tls_hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15);  // NUL bytes inside
  expect_openai_error(exchange(port(), tls_hello), 400, "bad_request");
  expect_openai_error(exchange(port(), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 400, "bad_request");
  expect_alive_and_same();
}

// ---------------------------------------------------------------------------
// Body limits, whatever the framing.

std::string chunked_post(const std::string& body, size_t piece) {
  std::string s = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += piece) {
    const std::string part = body.substr(at, piece);
    char size[20];
    std::snprintf(size, sizeof size, "%zx", part.size());
    s += std::string(size) + ";ext=1\r\n" + part + "\r\n";
  }
  return s + "0\r\nX-Trailer: t\r\n\r\n";
}

TEST_F(Hostile, BodyLimitsHoldForEveryFraming) {
  // A chunked body inside the limit is served like the same body with a length.
  const HttpResponse ok = exchange(port(), chunked_post(completion_body(kPrompt), 7));
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(comparable(ok), *baseline_);
  // A declared length over the limit: refused from the head alone.
  expect_openai_error(exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                       "Content-Length: 1000000000000\r\n\r\n"),
                      413, "request_too_large");
  // A chunked body over the limit, in small chunks and in one big chunk: 413
  // once the chunks cross it (the rest is never buffered).
  json big = {{"model", "tiny"}, {"prompt", kPrompt}, {"user", std::string(3 * kBodyLimit, 'u')}};
  expect_openai_error(exchange(port(), chunked_post(big.dump(), 1000)), 413, "request_too_large");
  expect_openai_error(exchange(port(), chunked_post(big.dump(), 2 * kBodyLimit)), 413, "request_too_large");
  // Compressed bodies are refused (they could inflate past the limit).
  expect_openai_error(exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                       "Content-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00"),
                      415, "unsupported_encoding");
  expect_openai_error(exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                       "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
                      400, "unsupported_encoding");
  // Ambiguous framing (request smuggling shapes).
  expect_openai_error(exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                       "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
                      400, "bad_request");
  expect_openai_error(exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                       "Content-Length: 4\r\n\r\nabcd"),
                      400, "bad_header");
  expect_openai_error(exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       "zz\r\nabc\r\n0\r\n\r\n"),
                      400, "bad_chunk");
  expect_alive_and_same();
}

// ---------------------------------------------------------------------------
// Slow and greedy clients.

// A plain socket for the attacks: non-blocking after connect.
int connect_raw(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

// Everything readable on a non-blocking socket now; false once it is closed.
bool drain(int fd, std::string& into) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

TEST_F(Hostile, SlowHeadersOnFiftyConnectionsStarveNobody) {
  constexpr int kSlow = 50;
  const uint64_t rss_before = test::rss_bytes(server_->pid());
  const json timeouts_before =
      exchange(port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").json()["connections"]["timeouts"];
  ASSERT_TRUE(timeouts_before.is_number()) << timeouts_before.dump();
  std::vector<int> fds;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = connect_raw(port());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  // Each sends its headers a byte every 50 ms, forever (it would take
  // minutes to finish), while /health and a normal request are timed.
  const std::string trickle = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(4000, 'a');
  std::atomic<bool> done{false};
  std::thread attacker([&] {
    for (size_t at = 0; !done.load() && at < trickle.size(); ++at) {
      for (int fd : fds) ::send(fd, trickle.data() + at, 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  // Nobody starves: /health is answered while the server holds all fifty
  // (its own figures say so: none timed out yet, and they are open beside
  // the asker). The latencies are figures (bench/results), not a bound.
  std::vector<double> health_ms;
  int answered_while_all_held = 0;
  const auto attack_start = Clock::now();
  while (seconds_since(attack_start) < kHeaderTimeoutS * 0.8) {
    const auto t = Clock::now();
    const HttpResponse h = exchange(port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    health_ms.push_back(seconds_since(t) * 1000);
    EXPECT_EQ(h.status, 200) << h.body;
    const json c = h.json().is_object() ? h.json()["connections"] : json();
    answered_while_all_held += c.is_object() && c["timeouts"] == timeouts_before && c["open"].get<int>() >= kSlow + 1;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_GE(answered_while_all_held, 1) << "/health was never answered while the slow connections were held";
  const auto t = Clock::now();
  const HttpResponse normal = exchange(port(), post_text("/v1/completions", completion_body(kPrompt)));
  const double normal_ms = seconds_since(t) * 1000;
  EXPECT_EQ(normal.status, 200) << normal.body;
  EXPECT_EQ(comparable(normal), *baseline_);
  // The header deadline is for the whole block: every trickling client gets
  // 408 and the close, however steadily it sends.
  std::vector<std::string> got(fds.size());
  std::vector<bool> open(fds.size(), true);
  const auto deadline = attack_start + std::chrono::seconds(kHeaderTimeoutS + 10);
  while (Clock::now() < deadline && std::count(open.begin(), open.end(), true) > 0) {
    for (size_t i = 0; i < fds.size(); ++i)
      if (open[i]) open[i] = drain(fds[i], got[i]);
    std::this_thread::sleep_for(milliseconds(20));
  }
  const double closed_after = seconds_since(attack_start);
  done.store(true);
  attacker.join();
  int answered_408 = 0;
  for (size_t i = 0; i < fds.size(); ++i) {
    EXPECT_FALSE(open[i]) << "slow connection " << i << " is still open after " << closed_after << " s";
    answered_408 += got[i].rfind("HTTP/1.1 408 ", 0) == 0;
    ::close(fds[i]);
  }
  EXPECT_EQ(answered_408, kSlow);
  const double worst = *std::max_element(health_ms.begin(), health_ms.end());
  const double median = [&] {
    std::vector<double> v = health_ms;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }();
  std::printf("[ figure   ] /health under %d slow-header connections: %zu calls, median %.1f ms, worst %.1f ms; "
              "a completion %.1f ms; all %d closed with 408 %.2f s after the attack began; RSS %.1f -> %.1f MB\n",
              kSlow, health_ms.size(), median, worst, normal_ms, kSlow, closed_after, rss_before / 1e6,
              test::rss_bytes(server_->pid()) / 1e6);
  expect_alive_and_same();
}

TEST_F(Hostile, HeaderFloodsAreRefusedAtTheLimitAndCostNoMemory) {
  const uint64_t rss_before = test::rss_bytes(server_->pid());
  // 300,000 header fields (the old server read them all), sent as fast as
  // the socket takes them: 431 after the 100th, the rest never read.
  std::string flood = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 300'000; ++i) flood += "X-F: v\r\n";
  flood += "\r\n";
  const auto t = Clock::now();
  const HttpResponse many = exchange(port(), flood);
  const double many_ms = seconds_since(t) * 1000;
  expect_openai_error(many, 431, "too_many_headers");
  // One header line of 1 MB.
  const HttpResponse long_line = exchange(port(), "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(1 << 20, 'b') +
                                                      "\r\n\r\n");
  expect_openai_error(long_line, 431, "header_too_large");
  // A head that never ends (no blank line) but keeps coming.
  const HttpResponse endless = exchange(port(), "GET /health HTTP/1.1\r\n" + std::string(200'000, 'x'));
  expect_openai_error(endless, 431, "header_too_large");
  // Ten floods at once.
  std::vector<std::thread> floods;
  std::atomic<int> refused{0};
  for (int i = 0; i < 10; ++i)
    floods.emplace_back([&] { refused += exchange(port(), flood).status == 431; });
  for (std::thread& f : floods) f.join();
  EXPECT_EQ(refused.load(), 10);
  const uint64_t rss_after = test::rss_bytes(server_->pid());
  std::printf("[ figure   ] header floods (300,000 fields, 1 MB line, endless head, 10 floods at once): refused in "
              "%.1f ms; RSS %.1f -> %.1f MB\n",
              many_ms, rss_before / 1e6, rss_after / 1e6);
  EXPECT_LT(rss_after, rss_before + (64ull << 20));
  expect_alive_and_same();
}

// /health's connection figures, by a probe that reads until the server has
// closed it: by then the server no longer counts the probe (it closes and
// forgets a connection in one step of its loop, before it accepts another).
// "open" is less the probe itself. Null when the probe got no /health answer
// (a 503 at the cap).
json connection_figures(int port) {
  const int fd = connect_raw(port);
  if (fd < 0) return nullptr;
  const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string got;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (drain(fd, got) && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  ::close(fd);
  const size_t body = got.find("\r\n\r\n");
  const json j = json::parse(body == std::string::npos ? "" : got.substr(body + 4), nullptr, false);
  if (!j.is_object() || !j.contains("connections")) return nullptr;
  json c = j["connections"];
  c["open"] = c["open"].get<int>() - 1;
  return c;
}

// Times /health on fresh connections every 50 ms while `attack` runs on its
// own thread; returns the worst latency in ms.
template <class Attack>
double worst_health_ms_during(int port, Attack attack) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    attack();
    done.store(true);
  });
  double worst = 0;
  int calls = 0;
  while (!done.load() || calls < 5) {
    const auto start = Clock::now();
    const HttpResponse h = exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(h.status, 200) << h.body;
    worst = std::max(worst, seconds_since(start) * 1000);
    ++calls;
    std::this_thread::sleep_for(milliseconds(50));
  }
  t.join();
  return worst;
}

TEST_F(Hostile, AChunkedBodyOfTinyChunksIsRefusedWhileHealthAnswers) {
  // 65,546 one-byte chunks (393 KB on the wire, a body just over the limit):
  // parsing used to move the buffer three times per chunk, holding the event
  // loop for seconds. The worst /health latency meanwhile is a figure
  // (bench/results), not a bound.
  std::string body = std::string(kBodyLimit + 10, 'x');
  std::string wire = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n";
  for (char c : body) wire += std::string("1\r\n") + c + "\r\n";
  wire += "0\r\n\r\n";
  HttpResponse refused;
  const double worst = worst_health_ms_during(port(), [&] { refused = exchange(port(), wire); });
  expect_openai_error(refused, 413, "request_too_large");
  std::printf("[ figure   ] /health while %zu one-byte chunks arrive: worst %.1f ms\n", body.size(), worst);
  expect_alive_and_same();
}

TEST_F(Hostile, ClientsThatNeverReadTheirAnswersHoldNoWorker) {
  // Two connections pipeline 3,000 requests each and read nothing: their
  // answers pile up in the socket and then in the server's output buffer,
  // never in a worker, so /health and a completion are still served while
  // both stay connected and unread. The worst /health latency is a figure
  // (bench/results), not a bound.
  std::string many;
  for (int i = 0; i < 3000; ++i) many += "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  std::vector<int> fds;
  const double worst = worst_health_ms_during(port(), [&] {
    for (int k = 0; k < 2; ++k) {
      const int fd = connect_raw(port());
      fds.push_back(fd);
      size_t at = 0;
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (at < many.size() && Clock::now() < deadline) {  // the server stops reading once its answers back up
        const ssize_t n = ::send(fd, many.data() + at, many.size() - at, MSG_NOSIGNAL);
        if (n > 0) at += static_cast<size_t>(n);
        else std::this_thread::sleep_for(milliseconds(10));
      }
    }
  });
  const HttpResponse r = exchange(port(), post_text("/v1/completions", completion_body(kPrompt)));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(comparable(r), *baseline_);
  std::printf("[ figure   ] /health while 2 clients pipeline 3,000 requests each and never read: worst %.1f ms\n", worst);
  for (int fd : fds) ::close(fd);
  expect_alive_and_same();
}

TEST_F(Hostile, HeadAnswersCarryNoBodySoTheNextAnswerStaysInStep) {
  HttpConnection c(port());
  ASSERT_TRUE(c.send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  HttpResponse head;
  ASSERT_TRUE(c.read_head(head));
  EXPECT_EQ(head.status, 200);
  EXPECT_NE(head.header("Content-Length"), "");
  c.next_response();
  const HttpResponse get = c.read_response();
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.json()["status"], "ok") << get.body;
}

TEST_F(Hostile, ConnectionsOverTheCapAre503AndTheCapRecovers) {
  // A server of its own whose header deadline (60 s) cannot close the held
  // connections while the case counts them.
  ServeProcess s(serve_args(60));
  ASSERT_TRUE(s.error().empty()) << s.error() << s.output();
  const uint64_t refused_before = connection_figures(s.port())["refused"].get<uint64_t>();
  constexpr int kOver = 24;
  std::vector<int> fds;
  for (int i = 0; i < kMaxConnections + kOver; ++i) {
    fds.push_back(connect_raw(s.port()));
    ASSERT_GE(fds.back(), 0) << "connection " << i;
  }
  // The server answers each connection past the cap with a 503 and closes
  // it; the ones it holds hear nothing until they send a request. Wait for
  // the refusals to arrive (30 s only bounds a hang).
  std::vector<std::string> got(fds.size());
  std::vector<bool> open(fds.size(), true);
  auto refused = [&] {
    int n = 0;
    for (size_t i = 0; i < fds.size(); ++i)
      n += !open[i] && got[i].rfind("HTTP/1.1 503 ", 0) == 0 && got[i].find("too_many_connections") != std::string::npos;
    return n;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (refused() < kOver && Clock::now() < deadline) {
    for (size_t i = 0; i < fds.size(); ++i)
      if (open[i]) open[i] = drain(fds[i], got[i]);
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(refused(), kOver) << "the connections beyond the cap were not all refused";
  // Exactly those: the server holds the cap's worth. Once one held
  // connection leaves, a probe gets in and finds the other 95 still open
  // (probes that come before the server has seen the close are refused too,
  // and counted).
  size_t held = fds.size();
  for (size_t i = 0; i < fds.size() && held == fds.size(); ++i)
    if (open[i]) held = i;
  ASSERT_LT(held, fds.size());
  ::close(fds[held]);
  fds[held] = -1;
  json figures;
  int probes_refused = 0;
  while (Clock::now() < deadline) {
    figures = connection_figures(s.port());
    if (!figures.is_null()) break;
    ++probes_refused;
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_FALSE(figures.is_null()) << "no probe got in after a held connection closed";
  EXPECT_EQ(figures["open"], kMaxConnections - 1);
  EXPECT_EQ(figures["refused"].get<uint64_t>() - refused_before, static_cast<uint64_t>(kOver + probes_refused));
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i] < 0) continue;
    if (open[i]) open[i] = drain(fds[i], got[i]);
    EXPECT_EQ(open[i], got[i].empty()) << "connection " << i << ": " << got[i];
    ::close(fds[i]);
  }
  EXPECT_EQ(refused(), kOver);
  // The cap recovers: once the server has seen every close, a probe finds
  // nobody else.
  auto open_now = [&] {
    const json f = connection_figures(s.port());
    return f.is_null() ? -1 : f["open"].get<int>();
  };
  int open_after = -1;
  while (Clock::now() < deadline && (open_after = open_now()) != 0) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(open_after, 0);
  expect_alive_and_same(s);
  EXPECT_EQ(s.stop(), 0) << s.output();
}

// ---------------------------------------------------------------------------
// Protocol: HTTP/1.0, pipelining, Expect.

TEST_F(Hostile, Http10StreamingIsCloseDelimitedAndCarriesTheSameText) {
  HttpConnection c(port());
  ASSERT_TRUE(c.send(post_text("/v1/completions", completion_body(kPrompt, true), "", "HTTP/1.0")));
  const HttpResponse r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Transfer-Encoding"), "");
  EXPECT_EQ(r.header("Connection"), "close");
  EXPECT_TRUE(r.complete);
  // The events' text adds up to the non-streaming answer.
  std::string text;
  size_t at = 0;
  bool done = false;
  while ((at = r.body.find("data: ", at)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", at);
    const std::string data = r.body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    text += json::parse(data)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_TRUE(done) << r.body;
  EXPECT_EQ(text, (*baseline_)["choices"][0]["text"].get<std::string>());
  // A plain HTTP/1.0 request gets a Content-Length response and the close.
  const HttpResponse plain = exchange(port(), post_text("/v1/completions", completion_body(kPrompt), "", "HTTP/1.0"));
  EXPECT_EQ(plain.status, 200);
  EXPECT_EQ(comparable(plain), *baseline_);
  EXPECT_EQ(plain.header("Connection"), "close");
  expect_alive_and_same();
}

TEST_F(Hostile, PipelinedRequestsAreAnsweredInOrder) {
  const std::string body = completion_body(kPrompt);
  const std::string keep = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  HttpConnection c(port());
  // Three requests in one write: two completions, then /health with a close.
  ASSERT_TRUE(c.send(keep + keep + "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const HttpResponse first = c.read_response();
  c.next_response();
  const HttpResponse second = c.read_response();
  c.next_response();
  const HttpResponse third = c.read_response();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(comparable(first), *baseline_);
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(comparable(second), *baseline_);
  EXPECT_EQ(third.status, 200);
  EXPECT_EQ(third.json()["status"], "ok") << third.body;
  EXPECT_EQ(first.header("Connection"), "keep-alive");
  EXPECT_EQ(third.header("Connection"), "close");
  expect_alive_and_same();
}

TEST_F(Hostile, ExpectContinueGetsA100BeforeTheBody) {
  const std::string body = completion_body(kPrompt);
  HttpConnection c(port());
  ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Expect: 100-continue\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n"));
  HttpResponse interim;
  ASSERT_TRUE(c.read_head(interim));
  EXPECT_EQ(interim.status, 100);
  c.next_response();
  ASSERT_TRUE(c.send(body));
  const HttpResponse r = c.read_response();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(comparable(r), *baseline_);
  // Over the limit: refused at once, without a 100.
  const HttpResponse big = exchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                            "Expect: 100-continue\r\nContent-Length: 9999999\r\n\r\n");
  expect_openai_error(big, 413, "request_too_large");
  expect_openai_error(exchange(port(), "GET /health HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n"), 417,
                      "expectation_failed");
  expect_alive_and_same();
}

// ---------------------------------------------------------------------------
// Admission by cost.

TEST(HostileAdmission, PromptsOverTheContextAndTheSessionBudgetAre400sWithBothNumbers) {
  ServeProcess s({"--model", model_dir(), "--served-model-name", "tiny", "--session-budget-mb", "2", "--max-tokens", "4"});
  ASSERT_TRUE(s.error().empty()) << s.error() << s.output();
  const json health = exchange(s.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").json();
  const int64_t context = health["context_limit"].get<int64_t>();
  const uint64_t budget = health["session_budget_bytes"].get<uint64_t>();
  EXPECT_EQ(budget, 2'000'000u);
  // The context is what the budget holds: far below the model's 1,048,576.
  EXPECT_GT(context, 16);
  EXPECT_LT(context, 2'000'000 / 480);  // the tiny model's 3 MLA layers keep 3 x 40 floats per position
  json ids = json::array();
  for (int64_t i = 0; i < context; ++i) ids.push_back(100 + i % 500);
  const json over = {{"model", "tiny"}, {"prompt", ids}, {"max_tokens", 1}};
  const HttpResponse r = exchange(s.port(), post_text("/v1/completions", over.dump()));
  expect_openai_error(r, 400, "context_length_exceeded");
  const std::string msg = r.json()["error"]["message"].get<std::string>();
  EXPECT_NE(msg.find(std::to_string(context) + " tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(budget)), std::string::npos) << msg;
  EXPECT_EQ(r.json()["error"]["param"], "prompt");
  // One token fewer fits, and is served.
  ids.erase(ids.end() - 1);
  const HttpResponse fits = exchange(s.port(), post_text("/v1/completions", json{{"model", "tiny"}, {"prompt", ids}, {"max_tokens", 1}}.dump()));
  EXPECT_EQ(fits.status, 200) << fits.body;
  EXPECT_EQ(s.stop(), 0);
  // A --context the budget cannot hold is refused at start, naming both.
  std::string out;
  const int status = test::run_child({test::deltafin_binary(), "serve", "--model", model_dir(), "--port", "0",
                                      "--session-budget-mb", "2", "--context", "100000"},
                                     {}, &out, std::chrono::seconds(60));
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--context 100000 needs"), std::string::npos) << out;
  EXPECT_NE(out.find("session budget is 2000000 bytes"), std::string::npos) << out;
}

// ---------------------------------------------------------------------------
// Cancellation during a long prefill.

json health_of(int port) { return exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", milliseconds(10'000)).json(); }

// Waits until the running request is `phase` (and, for prefill, has done
// some of it); false after `limit`.
bool wait_phase(int port, const std::string& phase, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    const json h = health_of(port);
    if (h.is_object() && h["current"]["phase"] == phase &&
        (phase != "prefill" || h["current"]["prefill_done"].get<int64_t>() > 0))
      return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

TEST(HostileCancel, AClientThatLeavesDuringALongPrefillStopsIt) {
  ServeProcess s({"--model", model_dir(), "--served-model-name", "tiny", "--threads", "1", "--prompt-cache-slots", "0"});
  ASSERT_TRUE(s.error().empty()) << s.error() << s.output();
  auto cancels_logged = [&] {
    const std::string out = s.output();
    size_t n = 0;
    for (size_t at = out.find(", cancelled, "); at != std::string::npos; at = out.find(", cancelled, ", at + 1)) ++n;
    return n;
  };
  for (const bool stream : {true, false}) {
    const size_t cancels_before = cancels_logged();
    const json before = health_of(s.port());
    HttpConnection c(s.port());
    ASSERT_TRUE(c.send(post_text("/v1/completions", long_prompt_body(stream))));
    ASSERT_TRUE(wait_phase(s.port(), "prefill", milliseconds(60'000))) << s.output();
    const json during = health_of(s.port());
    EXPECT_EQ(during["current"]["prompt_tokens"], kLongPrompt) << during.dump();
    EXPECT_LT(during["current"]["prefill_done"].get<int64_t>(), kLongPrompt) << during.dump();
    c.close(/*reset=*/true);
    const auto left = Clock::now();
    ASSERT_TRUE(wait_phase(s.port(), "idle", milliseconds(30'000))) << s.output();
    const double stop_s = seconds_since(left);
    const auto log_deadline = Clock::now() + std::chrono::seconds(10);
    while (cancels_logged() == cancels_before && Clock::now() < log_deadline) std::this_thread::sleep_for(milliseconds(10));
    EXPECT_EQ(cancels_logged(), cancels_before + 1) << "the request was not logged as cancelled:\n" << s.output();
    // It stopped inside the prefill: a request counts, with its prefilled
    // positions, only once its first token is out. (How soon it stopped is a
    // figure, bench/results, not a bound.)
    const json after = health_of(s.port());
    EXPECT_EQ(after["requests"], before["requests"]) << after.dump();
    EXPECT_EQ(after["prefill_positions"], before["prefill_positions"]) << after.dump();
    EXPECT_EQ(after["generated_tokens"], before["generated_tokens"]) << after.dump();
    std::printf("[ figure   ] a %d-token prefill (%s) stopped %.3f s after its client left (prefill at %lld of %d)\n",
                kLongPrompt, stream ? "streamed" : "not streamed", stop_s,
                static_cast<long long>(during["current"]["prefill_done"].get<int64_t>()), kLongPrompt);
  }
  // The server goes on serving.
  const HttpResponse r = exchange(s.port(), post_text("/v1/completions", completion_body(kPrompt)));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(s.stop(), 0);
}

TEST(HostileCancel, SigtermDuringALongPrefillStopsGracefully) {
  // The running request stops inside its prefill: no token of it reaches
  // the client. (How soon the process exits is a figure, bench/results, not
  // a bound; 30 s only bounds a hang.) One generation at a time, so that one
  // more waits in line.
  ServeProcess s({"--model", model_dir(), "--served-model-name", "tiny", "--threads", "1", "--prompt-cache-slots", "0",
                  "--parallel", "1"});
  ASSERT_TRUE(s.error().empty()) << s.error() << s.output();
  HttpConnection running(s.port());
  ASSERT_TRUE(running.send(post_text("/v1/completions", long_prompt_body(true))));
  ASSERT_TRUE(wait_phase(s.port(), "prefill", milliseconds(60'000))) << s.output();
  // One more waits in line behind it.
  HttpConnection queued(s.port());
  ASSERT_TRUE(queued.send(post_text("/v1/completions", completion_body(kPrompt))));
  const auto wait_queue = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < wait_queue && health_of(s.port())["waiting"] != 1) std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(health_of(s.port())["waiting"], 1);
  const auto signalled = Clock::now();
  s.signal(SIGTERM);
  const std::optional<int> status = s.wait_until(Clock::now() + std::chrono::seconds(30));
  const double stop_s = seconds_since(signalled);
  ASSERT_TRUE(status.has_value()) << "still running 30 s after SIGTERM:\n" << s.output();
  EXPECT_EQ(*status, 0) << s.output();
  // The queued request is answered 503 shutting_down; the running stream
  // ends with an error event and no [DONE].
  const HttpResponse q = queued.read_response();
  expect_openai_error(q, 503, "shutting_down");
  const HttpResponse r = running.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("shutting_down"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("\"text\""), std::string::npos) << "a token was sent: the prefill ran to its end\n" << r.body;
  // The exit line is the last the server writes: the output thread may
  // still be reading it after the exit (30 s only bounds a hang).
  EXPECT_TRUE(s.wait_for_output("s after the signal", milliseconds(30'000))) << s.output();
  const std::string out = s.output();
  EXPECT_NE(out.find(", cancelled, "), std::string::npos) << out;
  std::printf("[ figure   ] SIGTERM during a %d-token prefill with one request queued: exit %d after %.3f s\n",
              kLongPrompt, *status, stop_s);
}

}  // namespace
}  // namespace hostile_http_test
}  // namespace deltafin
