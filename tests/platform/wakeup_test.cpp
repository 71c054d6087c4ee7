// Both wake-up kinds (eventfd on Linux, the self-pipe everywhere): readable
// only once signalled and until drained, never blocking however often it is
// signalled, waking a thread asleep in a Poller, close-on-exec and
// non-blocking. Nothing is timed: a missed wake-up shows as a wait that
// returns nothing after its 10 s timeout.
#include "platform/wakeup.h"

#include <fcntl.h>
#include <poll.h>

#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <thread>
#include <vector>

namespace deltafin::platform {

void PrintTo(Wakeup::Kind k, std::ostream* os) { *os << (k == Wakeup::Kind::EventFd ? "eventfd" : "pipe"); }

namespace {

bool readable_now(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

std::vector<Wakeup::Kind> kinds_here() {
#if defined(__linux__)
  return {Wakeup::Kind::EventFd, Wakeup::Kind::Pipe};
#else
  return {Wakeup::Kind::Pipe};
#endif
}

class WakeupTest : public ::testing::TestWithParam<Wakeup::Kind> {
protected:
  void SetUp() override {
    std::string why;
    w_ = Wakeup::make(GetParam(), &why);
    ASSERT_NE(w_, nullptr) << why;
    ASSERT_EQ(w_->kind(), GetParam());
  }
  std::unique_ptr<Wakeup> w_;
};

TEST_P(WakeupTest, ReadableOnlyOnceSignalledAndUntilDrained) {
  EXPECT_FALSE(readable_now(w_->fd()));
  w_->signal();
  EXPECT_TRUE(readable_now(w_->fd()));
  w_->signal();  // a second signal before the drain is the same wake-up
  w_->drain();
  EXPECT_FALSE(readable_now(w_->fd()));
  w_->drain();  // draining an empty one does not block
  w_->signal();
  EXPECT_TRUE(readable_now(w_->fd()));
}

TEST_P(WakeupTest, SignallingFarMoreThanAPipeHoldsNeverBlocks) {
  // A pipe holds 64 KiB on Linux (16 KiB on some systems): 200,000 one-byte
  // signals fill it many times over. A blocking write would hang here.
  for (int i = 0; i < 200'000; ++i) w_->signal();
  EXPECT_TRUE(readable_now(w_->fd()));
  w_->drain();
  EXPECT_FALSE(readable_now(w_->fd()));
}

TEST_P(WakeupTest, ItsDescriptorIsNonBlockingAndCloseOnExec) {
  const int fl = ::fcntl(w_->fd(), F_GETFL), fd_fl = ::fcntl(w_->fd(), F_GETFD);
  ASSERT_GE(fl, 0);
  ASSERT_GE(fd_fl, 0);
  EXPECT_TRUE(fl & O_NONBLOCK);
  EXPECT_TRUE(fd_fl & FD_CLOEXEC);
}

TEST_P(WakeupTest, WakesAThreadAsleepInEitherPoller) {
  for (PollerBackend b : {PollerBackend::Poll, PollerBackend::Epoll}) {
    std::string why;
    std::unique_ptr<Poller> poller = make_poller(b, &why);
    if (!poller) continue;  // epoll off Linux
    SCOPED_TRACE(poller_name(b));
    ASSERT_TRUE(poller->add(w_->fd(), kReadable));
    std::vector<PollEvent> ready;
    int n = -1;
    std::thread sleeper([&] { n = poller->wait(10'000, &ready); });
    // Most likely asleep by now; if not, the signal is waiting for it (either way it wakes).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w_->signal();
    sleeper.join();
    ASSERT_EQ(n, 1);
    EXPECT_EQ(ready[0].fd, w_->fd());
    w_->drain();
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, WakeupTest, ::testing::ValuesIn(kinds_here()),
                         [](const ::testing::TestParamInfo<Wakeup::Kind>& i) {
                           return i.param == Wakeup::Kind::EventFd ? "eventfd" : "pipe";
                         });

TEST(Wakeup, EachPollerBackendGetsItsKind) {
  EXPECT_EQ(wakeup_kind_for(PollerBackend::Epoll), Wakeup::Kind::EventFd);
  EXPECT_EQ(wakeup_kind_for(PollerBackend::Poll), Wakeup::Kind::Pipe);
}

#if !defined(__linux__)
TEST(Wakeup, EventFdIsRefusedOffLinux) {
  std::string why;
  EXPECT_EQ(Wakeup::make(Wakeup::Kind::EventFd, &why), nullptr);
  EXPECT_NE(why.find("only on Linux"), std::string::npos) << why;
}
#endif

}  // namespace
}  // namespace deltafin::platform
