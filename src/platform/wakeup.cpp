#include "platform/wakeup.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "platform/fd_flags.h"

#if defined(__linux__)
#include <sys/eventfd.h>
#endif

namespace deltafin::platform {

namespace {

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

std::unique_ptr<Wakeup> no_wakeup(std::string* why, std::string text) {
  *why = std::move(text);
  return nullptr;
}

}  // namespace

std::unique_ptr<Wakeup> Wakeup::make(Kind kind, std::string* why) {
  if (kind == Kind::EventFd) {
#if defined(__linux__)
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return no_wakeup(why, errno_text("eventfd"));
    return std::unique_ptr<Wakeup>(new Wakeup(kind, fd, fd));
#else
    return no_wakeup(why, "eventfd exists only on Linux");
#endif
  }
  // pipe() and fcntl rather than pipe2(): macOS has no pipe2. The window in
  // which the ends lack FD_CLOEXEC is at the loop's creation, before serving.
  int ends[2];
  if (::pipe(ends) != 0) return no_wakeup(why, errno_text("pipe"));
  if (!set_nonblocking_cloexec(ends[0]) || !set_nonblocking_cloexec(ends[1])) {
    std::string text = errno_text("fcntl on the wake-up pipe");
    ::close(ends[0]);
    ::close(ends[1]);
    return no_wakeup(why, std::move(text));
  }
  return std::unique_ptr<Wakeup>(new Wakeup(kind, ends[0], ends[1]));
}

Wakeup::~Wakeup() {
  ::close(read_fd_);
  if (write_fd_ != read_fd_) ::close(write_fd_);
}

void Wakeup::signal() {
  // An eventfd takes exactly 8 bytes (a counter increment); a pipe any byte.
  const uint64_t one = 1;
  const size_t n = kind_ == Kind::EventFd ? sizeof one : 1;
  ssize_t r;
  do {
    r = ::write(write_fd_, &one, n);
  } while (r < 0 && errno == EINTR);
  // EAGAIN: the pipe is full or the counter at its limit; already readable.
}

void Wakeup::drain() {
  // An eventfd read returns the whole counter (8 bytes) and resets it; a pipe
  // is read until empty. 64 bytes serve both.
  char buf[64];
  for (;;) {
    const ssize_t r = ::read(read_fd_, buf, sizeof buf);
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    return;  // EAGAIN: empty
  }
}

Wakeup::Kind wakeup_kind_for(PollerBackend backend) {
  return backend == PollerBackend::Epoll ? Wakeup::Kind::EventFd : Wakeup::Kind::Pipe;
}

}  // namespace deltafin::platform
