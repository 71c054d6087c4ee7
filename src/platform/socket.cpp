#include "platform/socket.h"

#include <unistd.h>

#include <cerrno>

#include "platform/fd_flags.h"

namespace deltafin::platform {

namespace {

// The flags a fresh descriptor needs beyond what its call could set; on
// failure the descriptor is closed and errno kept.
int finish_socket(int fd) {
  if (fd < 0) return fd;
  bool ok = set_nonblocking_cloexec(fd);
#if defined(SO_NOSIGPIPE)
  // Where send() has no MSG_NOSIGNAL (macOS), the socket itself must not raise SIGPIPE.
  int yes = 1;
  ok = ok && ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &yes, sizeof yes) == 0;
#endif
  if (ok) return fd;
  const int err = errno;
  ::close(fd);
  errno = err;
  return -1;
}

}  // namespace

int open_socket_portable(int family, int type, int protocol) { return finish_socket(::socket(family, type, protocol)); }

int accept_connection_portable(int listen_fd, sockaddr* addr, socklen_t* len) {
  return finish_socket(::accept(listen_fd, addr, len));
}

#if defined(__linux__)

int open_socket(int family, int type, int protocol) {
  return ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
}

int accept_connection(int listen_fd, sockaddr* addr, socklen_t* len) {
  return ::accept4(listen_fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

#else

int open_socket(int family, int type, int protocol) { return open_socket_portable(family, type, protocol); }

int accept_connection(int listen_fd, sockaddr* addr, socklen_t* len) {
  return accept_connection_portable(listen_fd, addr, len);
}

#endif

}  // namespace deltafin::platform
