// The connection loop on each event backend (platform/poller.h), without a
// model: a handler that echoes the path. Every backend this system builds
// (epoll and poll on Linux) serves the same exchanges: a plain request,
// pipelined keep-alive requests, a response far larger than the socket
// buffer (the loop finishes it by waiting for writability, then reads the
// next request on the same connection), and a header block that never ends
// (408 at its deadline). ctest also runs the server's connection-level tests
// again with DELTAFIN_POLLER=poll (tests/CMakeLists.txt); the first case here
// is in that run and fails if the variable stopped reaching the loop.
#include "server/http/connection_loop.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>
#include <thread>

#include "server/http_test_client.h"
#include "util/error.h"

namespace deltafin::platform {
// Test names and messages say "epoll" / "poll" rather than the enum's bytes.
void PrintTo(PollerBackend b, std::ostream* os) { *os << poller_name(b); }
}  // namespace deltafin::platform

namespace deltafin::http {
namespace {

using platform::PollerBackend;
using test::HttpConnection;
using test::HttpResponse;

constexpr size_t kBigBody = 8u << 20;  // far beyond a loopback socket's buffer

void echo(Exchange& ex) {
  if (ex.request().path == "/big") return ex.respond(200, "text/plain", std::string(kBigBody, 'b'));
  ex.respond(200, "text/plain", ex.request().path);
}

std::string error_json(int status, const std::string& message, const std::string& code) {
  return "{\"status\":" + std::to_string(status) + ",\"message\":\"" + message + "\",\"code\":\"" + code + "\"}";
}

std::unique_ptr<ConnectionLoop> make_loop(LoopOptions o) {
  o.log = false;
  return std::make_unique<ConnectionLoop>(o, echo, [](const Request&) { return false; }, error_json);
}

// A loop on a free loopback port, run on its own thread until destroyed.
class RunningLoop {
public:
  explicit RunningLoop(LoopOptions o) : loop_(make_loop(o)) {
    port_ = loop_->bind("127.0.0.1", 0);
    thread_ = std::thread([this] { loop_->run(); });
  }
  ~RunningLoop() {
    loop_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  ConnectionLoop& loop() { return *loop_; }

private:
  std::unique_ptr<ConnectionLoop> loop_;
  int port_ = 0;
  std::thread thread_;
};

PollerBackend expected_from_env() {
  const char* v = std::getenv("DELTAFIN_POLLER");
  if (v == nullptr || *v == '\0') return platform::default_poller_backend();
  return std::string(v) == "poll" ? PollerBackend::Poll : PollerBackend::Epoll;
}

TEST(HttpEventLoop, RunsTheBackendDeltafinPollerNames) {
  std::unique_ptr<ConnectionLoop> loop = make_loop({});
  EXPECT_EQ(loop->poller_backend(), expected_from_env())
      << "DELTAFIN_POLLER=" << (std::getenv("DELTAFIN_POLLER") ? std::getenv("DELTAFIN_POLLER") : "(unset)");
}

TEST(HttpEventLoop, AnUnknownDeltafinPollerIsAnErrorNamingIt) {
  const char* saved = std::getenv("DELTAFIN_POLLER");
  const std::string keep = saved ? saved : "";
  ::setenv("DELTAFIN_POLLER", "select", 1);
  std::string message;
  try {
    make_loop({});
  } catch (const deltafin::Error& e) {
    message = e.what();
  }
  if (saved) ::setenv("DELTAFIN_POLLER", keep.c_str(), 1);
  else ::unsetenv("DELTAFIN_POLLER");
  EXPECT_NE(message.find("DELTAFIN_POLLER=select"), std::string::npos) << message;
}

class EventLoopBackend : public ::testing::TestWithParam<PollerBackend> {
protected:
  LoopOptions options() const {
    LoopOptions o;
    o.poller = GetParam();
    o.header_timeout = std::chrono::milliseconds(300);
    return o;
  }
};

TEST_P(EventLoopBackend, AnOptionChoosesTheBackendWhateverTheEnvironment) {
  RunningLoop l(options());
  EXPECT_EQ(l.loop().poller_backend(), GetParam());
}

TEST_P(EventLoopBackend, ServesPlainAndPipelinedRequests) {
  RunningLoop l(options());
  const HttpResponse r = test::http_call(l.port(), "GET", "/hello");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "/hello");
  HttpConnection c(l.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\n"));
  HttpResponse first = c.read_response();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "/one");
  c.next_response();
  HttpResponse second = c.read_response();
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.body, "/two");
}

TEST_P(EventLoopBackend, ALargeResponseIsFinishedByTheLoopAndTheConnectionReadAgain) {
  RunningLoop l(options());
  HttpConnection c(l.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n"));
  HttpResponse big = c.read_response();
  EXPECT_EQ(big.status, 200);
  EXPECT_TRUE(big.complete);
  EXPECT_EQ(big.body.size(), kBigBody);
  c.next_response();
  ASSERT_TRUE(c.send("GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  HttpResponse after = c.read_response();
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(after.body, "/after");
}

TEST_P(EventLoopBackend, AHeaderBlockThatNeverEndsGets408) {
  RunningLoop l(options());
  HttpConnection c(l.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("GET /slow HTTP/1.1\r\nHost: x\r\n"));  // no blank line: never complete
  HttpResponse r = c.read_response();  // the loop answers at the 300 ms deadline
  EXPECT_EQ(r.status, 408);
  EXPECT_EQ(l.loop().stats().timeouts, 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, EventLoopBackend, ::testing::ValuesIn(platform::poller_backends_here()),
                         [](const ::testing::TestParamInfo<PollerBackend>& i) { return platform::poller_name(i.param); });

}  // namespace
}  // namespace deltafin::http
