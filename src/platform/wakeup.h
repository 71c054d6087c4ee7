// Wakes a thread that sleeps in a Poller, from another thread: a descriptor
// that turns readable when signalled. Why two kinds: eventfd (one descriptor
// holding a counter) is Linux-only; a non-blocking self-pipe does the same
// with two descriptors on every POSIX system. Both are built on Linux, so
// both are tested there.
#pragma once

#include <memory>
#include <string>

#include "platform/poller.h"

namespace deltafin::platform {

class Wakeup {
public:
  enum class Kind { EventFd, Pipe };

  // nullptr with *why set ("eventfd: <errno text>", "pipe: ...") on failure;
  // EventFd anywhere but Linux fails saying so.
  static std::unique_ptr<Wakeup> make(Kind kind, std::string* why);
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // Watch this for kReadable.
  int fd() const { return read_fd_; }
  // From any thread: fd() turns readable. Never blocks: a full pipe (or a
  // counter at its limit) already means "woken", so a failed write loses nothing.
  void signal();
  // On the watching thread once fd() was ready: fd() is not readable until
  // the next signal().
  void drain();
  Kind kind() const { return kind_; }

private:
  Wakeup(Kind kind, int read_fd, int write_fd) : kind_(kind), read_fd_(read_fd), write_fd_(write_fd) {}

  Kind kind_;
  int read_fd_, write_fd_;  // the same descriptor for an eventfd
};

// The wake-up that goes with a poller backend: eventfd beside epoll, a
// self-pipe beside poll (so DELTAFIN_POLLER=poll runs, on Linux, the event
// loop macOS gets).
Wakeup::Kind wakeup_kind_for(PollerBackend backend);

}  // namespace deltafin::platform
