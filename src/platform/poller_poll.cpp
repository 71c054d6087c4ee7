// The portable Poller: poll(2) over an array kept beside an fd -> slot map, so
// add, modify and remove cost O(1) and a wait costs one scan of the array
// (what poll does in the kernel anyway).
#include <poll.h>

#include <cerrno>
#include <unordered_map>
#include <vector>

#include "platform/poller_backends.h"

namespace deltafin::platform {

namespace {

short to_poll(uint32_t interest) {
  short e = 0;
  if (interest & kReadable) e |= POLLIN;
  if (interest & kWritable) e |= POLLOUT;
  return e;
}

uint32_t from_poll(short revents) {
  uint32_t e = 0;
  if (revents & POLLIN) e |= kReadable;
  if (revents & POLLOUT) e |= kWritable;
  // POLLNVAL: the fd was closed while watched (a caller's bug); reported as a
  // hang-up so the caller looks at it instead of the loop spinning silently.
  if (revents & (POLLERR | POLLHUP | POLLNVAL)) e |= kHangup;
  return e;
}

class PollPoller final : public Poller {
public:
  bool add(int fd, uint32_t interest) override {
    if (fd < 0) return fail_with(EBADF);
    if (slot_.count(fd)) return fail_with(EEXIST);
    slot_[fd] = fds_.size();
    fds_.push_back(pollfd{fd, to_poll(interest), 0});
    return true;
  }

  bool modify(int fd, uint32_t interest) override {
    auto it = slot_.find(fd);
    if (it == slot_.end()) return fail_with(ENOENT);
    fds_[it->second].events = to_poll(interest);
    return true;
  }

  bool remove(int fd) override {
    auto it = slot_.find(fd);
    if (it == slot_.end()) return fail_with(ENOENT);
    // The last entry takes the freed slot.
    const size_t at = it->second;
    slot_.erase(it);
    if (at + 1 != fds_.size()) {
      fds_[at] = fds_.back();
      slot_[fds_[at].fd] = at;
    }
    fds_.pop_back();
    return true;
  }

  int wait(int timeout_ms, std::vector<PollEvent>* ready) override {
    ready->clear();
    const int n = ::poll(fds_.data(), static_cast<nfds_t>(fds_.size()), timeout_ms);
    if (n <= 0) return n;
    for (const pollfd& p : fds_)
      if (p.revents != 0) ready->push_back({p.fd, from_poll(p.revents)});
    return static_cast<int>(ready->size());
  }

  PollerBackend backend() const override { return PollerBackend::Poll; }

private:
  static bool fail_with(int err) {
    errno = err;
    return false;
  }

  std::vector<pollfd> fds_;
  std::unordered_map<int, size_t> slot_;  // fd -> index in fds_
};

}  // namespace

std::unique_ptr<Poller> make_poll_poller() { return std::make_unique<PollPoller>(); }

}  // namespace deltafin::platform
