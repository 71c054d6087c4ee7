// Readiness of many descriptors for one event-loop thread (the HTTP server's
// connection loop). Why a layer: epoll, which the loop used directly, exists
// only on Linux; poll(2) is in every POSIX system, macOS included, and is fast
// enough for what the server holds (--max-connections, 256 by default: one
// poll() call scans them all in microseconds). Both backends are built on
// Linux, so both are tested there; the loop takes epoll on Linux unless
// DELTAFIN_POLLER=poll asks for the portable one.
//
// Level-triggered, as the loop expects: a descriptor is reported on every
// wait while it is ready, until it is drained or its interest changes.
// One thread uses a poller at a time (no locking inside).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace deltafin::platform {

enum class PollerBackend { Epoll, Poll };

// Interest and readiness bits.
enum : uint32_t {
  kReadable = 1u,  // data, a new connection, or the peer's close (read says which)
  kWritable = 2u,
  kHangup = 4u,    // error or hang-up; reported whatever the interest
};

struct PollEvent {
  int fd = -1;
  uint32_t events = 0;
};

class Poller {
public:
  virtual ~Poller() = default;
  // Each returns false with errno set when the call fails, as epoll_ctl does:
  // EEXIST (add of a watched fd), ENOENT (modify or remove of an unwatched one).
  virtual bool add(int fd, uint32_t interest) = 0;
  virtual bool modify(int fd, uint32_t interest) = 0;
  virtual bool remove(int fd) = 0;
  // Waits up to timeout_ms (-1: no limit) until a watched descriptor is ready;
  // *ready gets one entry per ready descriptor (cleared first). Returns how
  // many, 0 on timeout, or -1 with errno set (EINTR: a signal came first).
  virtual int wait(int timeout_ms, std::vector<PollEvent>* ready) = 0;
  virtual PollerBackend backend() const = 0;
};

// "epoll" or "poll": what DELTAFIN_POLLER takes and messages say.
const char* poller_name(PollerBackend backend);
// This system's choice: epoll on Linux, poll everywhere else.
PollerBackend default_poller_backend();
// Every backend built here, the default first (tests run each of them).
std::vector<PollerBackend> poller_backends_here();
// DELTAFIN_POLLER's choice (epoll or poll), or the default when it is unset
// or empty. Any other value, and epoll where it is not built, throws
// deltafin::Error naming the variable and the values allowed here.
PollerBackend poller_backend_from_env();
// nullptr with *why set ("epoll_create1: <errno text>") when the backend cannot
// be made here (epoll anywhere but Linux: why says so).
std::unique_ptr<Poller> make_poller(PollerBackend backend, std::string* why);

}  // namespace deltafin::platform
