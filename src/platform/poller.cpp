#include "platform/poller.h"

#include <cstdlib>

#include "platform/poller_backends.h"
#include "util/error.h"

namespace deltafin::platform {

const char* poller_name(PollerBackend backend) { return backend == PollerBackend::Epoll ? "epoll" : "poll"; }

PollerBackend default_poller_backend() {
#if defined(__linux__)
  return PollerBackend::Epoll;
#else
  return PollerBackend::Poll;
#endif
}

std::vector<PollerBackend> poller_backends_here() {
#if defined(__linux__)
  return {PollerBackend::Epoll, PollerBackend::Poll};
#else
  return {PollerBackend::Poll};
#endif
}

PollerBackend poller_backend_from_env() {
  const char* v = std::getenv("DELTAFIN_POLLER");
  if (v == nullptr || *v == '\0') return default_poller_backend();
  const std::string value = v;
#if defined(__linux__)
  if (value == "epoll") return PollerBackend::Epoll;
  if (value == "poll") return PollerBackend::Poll;
  fail("DELTAFIN_POLLER=", value, ": unknown event loop backend; use epoll or poll (unset: epoll)");
#else
  if (value == "poll") return PollerBackend::Poll;
  if (value == "epoll") fail("DELTAFIN_POLLER=epoll: epoll exists only on Linux; use poll (or leave it unset)");
  fail("DELTAFIN_POLLER=", value, ": unknown event loop backend; the only one here is poll (unset: poll)");
#endif
}

std::unique_ptr<Poller> make_poller(PollerBackend backend, std::string* why) {
  if (backend == PollerBackend::Poll) return make_poll_poller();
  return make_epoll_poller(why);
}

}  // namespace deltafin::platform
