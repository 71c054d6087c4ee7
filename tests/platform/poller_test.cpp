// Both Poller backends on the same cases (epoll exists only on Linux; poll(2)
// everywhere): readiness of pipes and socket pairs, changed and removed
// interest, the timeout, a peer's close. No case bounds a wait from above:
// the tests run on a loaded 2-core machine, so a "ready" case waits with a
// long timeout and checks what came back, and the timeout case checks only
// that nothing came back and that the wait lasted about as long as asked.
#include "platform/poller.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace deltafin::platform {

// Test names and messages say "epoll" / "poll" rather than the enum's bytes.
void PrintTo(PollerBackend b, std::ostream* os) { *os << poller_name(b); }

namespace {

using Clock = std::chrono::steady_clock;

// Long enough never to expire on a loaded machine when something is ready.
constexpr int kLongWaitMs = 10'000;

struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    r = fds[0], w = fds[1];
  }
  ~Pipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
};

struct SocketPair {
  int a = -1, b = -1;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("socketpair failed");
    a = fds[0], b = fds[1];
  }
  ~SocketPair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
};

void put_byte(int fd) { ASSERT_EQ(::write(fd, "x", 1), 1); }

// The events reported for fd in one wait, 0 when it was not reported.
uint32_t events_for(const std::vector<PollEvent>& ready, int fd) {
  uint32_t e = 0;
  for (const PollEvent& p : ready)
    if (p.fd == fd) e |= p.events;
  return e;
}

class PollerTest : public ::testing::TestWithParam<PollerBackend> {
protected:
  void SetUp() override {
    std::string why;
    poller_ = make_poller(GetParam(), &why);
    ASSERT_NE(poller_, nullptr) << why;
    ASSERT_EQ(poller_->backend(), GetParam());
  }
  std::unique_ptr<Poller> poller_;
  std::vector<PollEvent> ready_;
};

TEST_P(PollerTest, APipeIsReadableOnlyOnceWrittenAndUntilDrained) {
  Pipe p;
  ASSERT_TRUE(poller_->add(p.r, kReadable));
  EXPECT_EQ(poller_->wait(0, &ready_), 0);
  EXPECT_TRUE(ready_.empty());
  put_byte(p.w);
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 1);
  EXPECT_EQ(ready_[0].fd, p.r);
  EXPECT_TRUE(ready_[0].events & kReadable);
  // Level-triggered: still ready until read.
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 1);
  char c;
  ASSERT_EQ(::read(p.r, &c, 1), 1);
  EXPECT_EQ(poller_->wait(0, &ready_), 0);
}

TEST_P(PollerTest, OnlyTheReadyDescriptorsAreReported) {
  std::vector<std::unique_ptr<Pipe>> pipes;
  for (int i = 0; i < 40; ++i) {
    pipes.push_back(std::make_unique<Pipe>());
    ASSERT_TRUE(poller_->add(pipes.back()->r, kReadable));
  }
  for (int i : {3, 17, 39}) put_byte(pipes[static_cast<size_t>(i)]->w);
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 3);
  for (int i = 0; i < 40; ++i) {
    const bool written = i == 3 || i == 17 || i == 39;
    EXPECT_EQ(events_for(ready_, pipes[static_cast<size_t>(i)]->r) != 0, written) << "pipe " << i;
  }
}

TEST_P(PollerTest, ModifiedInterestIsWhatIsReported) {
  SocketPair s;
  // A fresh socket has room to write: ready at once for writing.
  ASSERT_TRUE(poller_->add(s.a, kWritable));
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 1);
  EXPECT_EQ(ready_[0].fd, s.a);
  EXPECT_TRUE(ready_[0].events & kWritable);
  EXPECT_FALSE(ready_[0].events & kReadable);
  // Read interest only: nothing to read yet.
  ASSERT_TRUE(poller_->modify(s.a, kReadable));
  EXPECT_EQ(poller_->wait(0, &ready_), 0);
  put_byte(s.b);
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 1);
  EXPECT_TRUE(ready_[0].events & kReadable);
  EXPECT_FALSE(ready_[0].events & kWritable);
  // Both.
  ASSERT_TRUE(poller_->modify(s.a, kReadable | kWritable));
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 1);
  EXPECT_EQ(ready_[0].events & (kReadable | kWritable), kReadable | kWritable);
}

TEST_P(PollerTest, ARemovedDescriptorIsNotReportedAndCanBeAddedAgain) {
  Pipe a, b;
  ASSERT_TRUE(poller_->add(a.r, kReadable));
  ASSERT_TRUE(poller_->add(b.r, kReadable));
  put_byte(a.w);
  put_byte(b.w);
  ASSERT_TRUE(poller_->remove(a.r));
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 1);
  EXPECT_EQ(ready_[0].fd, b.r);
  ASSERT_TRUE(poller_->remove(b.r));
  EXPECT_EQ(poller_->wait(0, &ready_), 0);
  ASSERT_TRUE(poller_->add(a.r, kReadable));
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 1);
  EXPECT_EQ(ready_[0].fd, a.r);
}

TEST_P(PollerTest, MisuseFailsLikeEpollCtl) {
  Pipe p;
  errno = 0;
  EXPECT_FALSE(poller_->remove(p.r));
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_FALSE(poller_->modify(p.r, kReadable));
  EXPECT_EQ(errno, ENOENT);
  ASSERT_TRUE(poller_->add(p.r, kReadable));
  errno = 0;
  EXPECT_FALSE(poller_->add(p.r, kReadable));
  EXPECT_EQ(errno, EEXIST);
}

TEST_P(PollerTest, ATimeoutWithNothingReadyReturnsNoEventsAfterAboutThatLong) {
  Pipe p;
  ASSERT_TRUE(poller_->add(p.r, kReadable));
  const auto start = Clock::now();
  int n;
  do {
    n = poller_->wait(200, &ready_);
  } while (n < 0 && errno == EINTR && Clock::now() - start < std::chrono::milliseconds(150));
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  EXPECT_EQ(n, 0);
  EXPECT_TRUE(ready_.empty());
  // The kernels round a timeout up, never down; 150 leaves room for clock granularity.
  EXPECT_GE(waited.count(), 150) << "a 200 ms wait returned after " << waited.count() << " ms";
}

TEST_P(PollerTest, APeersCloseMakesTheSocketReadable) {
  SocketPair s;
  ASSERT_TRUE(poller_->add(s.a, kReadable));
  EXPECT_EQ(poller_->wait(0, &ready_), 0);
  ::close(s.b);
  s.b = -1;
  ASSERT_EQ(poller_->wait(kLongWaitMs, &ready_), 1);
  EXPECT_EQ(ready_[0].fd, s.a);
  EXPECT_TRUE(ready_[0].events & (kReadable | kHangup));
  char c;
  EXPECT_EQ(::read(s.a, &c, 1), 0);  // what the loop reads to learn it
}

INSTANTIATE_TEST_SUITE_P(Backends, PollerTest, ::testing::ValuesIn(poller_backends_here()),
                         [](const ::testing::TestParamInfo<PollerBackend>& i) { return poller_name(i.param); });

// DELTAFIN_POLLER, set and restored around each case (ctest runs every case in
// its own process; a plain run of the binary gets the variable back).
class PollerEnv : public ::testing::Test {
protected:
  void SetUp() override {
    if (const char* v = std::getenv("DELTAFIN_POLLER")) saved_ = v, had_ = true;
  }
  void TearDown() override {
    if (had_) ::setenv("DELTAFIN_POLLER", saved_.c_str(), 1);
    else ::unsetenv("DELTAFIN_POLLER");
  }
  std::string saved_;
  bool had_ = false;
};

TEST_F(PollerEnv, UnsetOrEmptyMeansThisSystemsDefault) {
  ::unsetenv("DELTAFIN_POLLER");
  EXPECT_EQ(poller_backend_from_env(), default_poller_backend());
  ::setenv("DELTAFIN_POLLER", "", 1);
  EXPECT_EQ(poller_backend_from_env(), default_poller_backend());
#if defined(__linux__)
  EXPECT_EQ(default_poller_backend(), PollerBackend::Epoll);
#else
  EXPECT_EQ(default_poller_backend(), PollerBackend::Poll);
#endif
}

TEST_F(PollerEnv, NamesAreHonoured) {
  ::setenv("DELTAFIN_POLLER", "poll", 1);
  EXPECT_EQ(poller_backend_from_env(), PollerBackend::Poll);
#if defined(__linux__)
  ::setenv("DELTAFIN_POLLER", "epoll", 1);
  EXPECT_EQ(poller_backend_from_env(), PollerBackend::Epoll);
#else
  ::setenv("DELTAFIN_POLLER", "epoll", 1);
  EXPECT_FAILS_WITH(poller_backend_from_env(), "DELTAFIN_POLLER=epoll", "only on Linux", "poll");
#endif
}

TEST_F(PollerEnv, AnUnknownValueIsAnErrorNamingTheVariableAndTheChoices) {
  ::setenv("DELTAFIN_POLLER", "kqueue", 1);
#if defined(__linux__)
  EXPECT_FAILS_WITH(poller_backend_from_env(), "DELTAFIN_POLLER=kqueue", "unknown", "epoll or poll");
#else
  EXPECT_FAILS_WITH(poller_backend_from_env(), "DELTAFIN_POLLER=kqueue", "unknown", "poll");
#endif
  ::setenv("DELTAFIN_POLLER", "Poll", 1);  // names are exact
  EXPECT_FAILS_WITH(poller_backend_from_env(), "DELTAFIN_POLLER=Poll");
}

#if !defined(__linux__)
TEST(Poller, EpollIsRefusedOffLinux) {
  std::string why;
  EXPECT_EQ(make_poller(PollerBackend::Epoll, &why), nullptr);
  EXPECT_NE(why.find("only on Linux"), std::string::npos) << why;
}
#endif

}  // namespace
}  // namespace deltafin::platform
