// The Linux Poller: epoll, whose wait costs what is ready rather than what is
// watched. Elsewhere make_epoll_poller says it does not exist.
#include "platform/poller_backends.h"

#if defined(__linux__)
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#endif

namespace deltafin::platform {

#if defined(__linux__)

namespace {

// The most descriptors one wait reports; the rest stay ready for the next
// (level-triggered), so a flood of ready connections is served in turns.
constexpr int kMaxEvents = 256;

uint32_t to_epoll(uint32_t interest) {
  uint32_t e = 0;
  // EPOLLRDHUP: the peer's close is reported even while no data is pending.
  if (interest & kReadable) e |= EPOLLIN | EPOLLRDHUP;
  if (interest & kWritable) e |= EPOLLOUT;
  return e;
}

uint32_t from_epoll(uint32_t events) {
  uint32_t e = 0;
  if (events & (EPOLLIN | EPOLLRDHUP)) e |= kReadable;
  if (events & EPOLLOUT) e |= kWritable;
  if (events & (EPOLLERR | EPOLLHUP)) e |= kHangup;
  return e;
}

class EpollPoller final : public Poller {
public:
  explicit EpollPoller(int epfd) : epfd_(epfd), events_(kMaxEvents) {}
  ~EpollPoller() override { ::close(epfd_); }
  EpollPoller(const EpollPoller&) = delete;
  EpollPoller& operator=(const EpollPoller&) = delete;

  bool add(int fd, uint32_t interest) override { return ctl(EPOLL_CTL_ADD, fd, interest); }
  bool modify(int fd, uint32_t interest) override { return ctl(EPOLL_CTL_MOD, fd, interest); }
  bool remove(int fd) override { return ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr) == 0; }

  int wait(int timeout_ms, std::vector<PollEvent>* ready) override {
    ready->clear();
    const int n = ::epoll_wait(epfd_, events_.data(), kMaxEvents, timeout_ms);
    for (int i = 0; i < n; ++i) {
      const epoll_event& ev = events_[static_cast<size_t>(i)];
      ready->push_back({ev.data.fd, from_epoll(ev.events)});
    }
    return n;
  }

  PollerBackend backend() const override { return PollerBackend::Epoll; }

private:
  bool ctl(int op, int fd, uint32_t interest) {
    epoll_event ev{};
    ev.events = to_epoll(interest);
    ev.data.fd = fd;
    return ::epoll_ctl(epfd_, op, fd, &ev) == 0;
  }

  int epfd_;
  std::vector<epoll_event> events_;
};

}  // namespace

std::unique_ptr<Poller> make_epoll_poller(std::string* why) {
  const int epfd = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) {
    *why = std::string("epoll_create1: ") + std::strerror(errno);
    return nullptr;
  }
  return std::make_unique<EpollPoller>(epfd);
}

#else

std::unique_ptr<Poller> make_epoll_poller(std::string* why) {
  *why = "epoll exists only on Linux";
  return nullptr;
}

#endif

}  // namespace deltafin::platform
