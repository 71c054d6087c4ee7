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

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

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

// Polls `done` every millisecond for up to 60 s (a failure cannot hang).
bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The request bytes held across all connections are bounded: the request
// that would cross max_buffered_bytes is answered 503 server_busy and
// dropped, the one holding the bytes is served, and once they are let go the
// loop takes a request of that size again.
TEST_P(EventLoopBackend, TheRequestThatCrossesTheBufferLimitGets503ServerBusy) {
  LoopOptions o = options();
  o.header_timeout = std::chrono::seconds(30);  // no 408 however slow a loaded machine sends
  o.max_buffered_bytes = 4096;
  RunningLoop l(o);
  HttpConnection a(l.port()), b(l.port());
  ASSERT_TRUE(a.connected() && b.connected());
  // a's head and 3000 bytes of its 3500-byte body: held while the rest comes.
  ASSERT_TRUE(a.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3500\r\n\r\n" + std::string(3000, 'a')));
  ASSERT_TRUE(eventually([&] { return l.loop().stats().buffered_bytes >= 3000; }))
      << l.loop().stats().buffered_bytes << " bytes held";
  // b's 2000 bytes would make 5000 > 4096.
  ASSERT_TRUE(b.send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n" + std::string(2000, 'b')));
  const HttpResponse busy = b.read_response();
  EXPECT_EQ(busy.status, 503);
  EXPECT_NE(busy.body.find("\"code\":\"server_busy\""), std::string::npos) << busy.body;
  EXPECT_NE(busy.body.find("too many request bytes from all clients at once (4096)"), std::string::npos) << busy.body;
  ASSERT_TRUE(a.send(std::string(500, 'a')));
  const HttpResponse served = a.read_response();
  EXPECT_EQ(served.status, 200);
  EXPECT_EQ(served.body, "/a");
  EXPECT_EQ(l.loop().stats().refused, 1u);
  // Every byte let go (a answered, b dropped): room for b's request again.
  EXPECT_TRUE(eventually([&] { return l.loop().stats().buffered_bytes == 0; }))
      << l.loop().stats().buffered_bytes << " bytes still held";
  const HttpResponse again = test::http_call(l.port(), "POST", "/again", std::string(2000, 'c'));
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body, "/again");
}

// Holds this process at its descriptor limit: lowers the soft RLIMIT_NOFILE
// to a little above the descriptors now open and fills the table up to it
// with /dev/null. release(n) closes n of them; the destructor closes the rest
// and restores the limit.
class DescriptorsExhausted {
public:
  DescriptorsExhausted() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    const int probe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, static_cast<rlim_t>(probe) + 32);
    ::close(probe);
    ok_ = probe >= 0 && ::setrlimit(RLIMIT_NOFILE, &low) == 0;
    for (int fd; ok_ && (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held_.push_back(fd);
    ok_ = ok_ && errno == EMFILE;
  }
  ~DescriptorsExhausted() {
    release(held_.size());
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  DescriptorsExhausted(const DescriptorsExhausted&) = delete;
  DescriptorsExhausted& operator=(const DescriptorsExhausted&) = delete;
  bool ok() const { return ok_; }
  void release(size_t n) {
    for (; n > 0 && !held_.empty(); --n) {
      ::close(held_.back());
      held_.pop_back();
    }
  }

private:
  rlimit saved_{};
  std::vector<int> held_;
  bool ok_ = false;
};

// Out of descriptors, accept fails (EMFILE): the loop pauses accepting for
// 100 ms at a time instead of spinning on the listening socket, serves the
// connections it has meanwhile, and accepts the waiting client once
// descriptors are free again.
TEST_P(EventLoopBackend, OutOfDescriptorsTheLoopKeepsServingAndAcceptsAgainAfter) {
  LoopOptions o = options();
  o.header_timeout = std::chrono::seconds(30);  // no 408 however slow a loaded machine sends
  RunningLoop l(o);
  HttpConnection open_before(l.port());
  ASSERT_TRUE(open_before.connected());
  ASSERT_TRUE(open_before.send("GET /before HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(open_before.read_response().body, "/before");
  open_before.next_response();

  std::optional<HttpConnection> waiting;
  const auto t0 = std::chrono::steady_clock::now();
  {
    DescriptorsExhausted full;
    ASSERT_TRUE(full.ok()) << "could not fill the descriptor table";
    full.release(1);  // the client's own socket; the loop's accept finds none
    waiting.emplace(l.port());
    ASSERT_TRUE(waiting->connected());  // the kernel completes the handshake into the backlog
    ASSERT_TRUE(eventually([&] { return l.loop().stats().descriptor_pauses > 0; })) << "accept never failed";
    // Still serving: the open connection's next request is answered.
    ASSERT_TRUE(open_before.send("GET /during HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(open_before.read_response().body, "/during");
    EXPECT_EQ(l.loop().stats().accepted, 1u);  // the waiting client is not in yet
  }
  // Each pause lasts at least 100 ms: a loop that spun on EMFILE would count thousands.
  const auto exhausted_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t pauses = l.loop().stats().descriptor_pauses;
  EXPECT_LE(pauses, static_cast<uint64_t>(exhausted_ms / 100 + 1)) << "in " << exhausted_ms << " ms";
  ASSERT_TRUE(waiting->send("GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const HttpResponse after = waiting->read_response();
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(after.body, "/after");
  EXPECT_EQ(l.loop().stats().accepted, 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, EventLoopBackend, ::testing::ValuesIn(platform::poller_backends_here()),
                         [](const ::testing::TestParamInfo<PollerBackend>& i) { return platform::poller_name(i.param); });

}  // namespace
}  // namespace deltafin::http
