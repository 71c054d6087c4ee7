// Sockets for the HTTP server's event loop. Every socket it owns is
// non-blocking (the loop never waits on one) and close-on-exec (a program the
// process starts must not inherit a client's connection). Linux sets both
// atomically (SOCK_NONBLOCK | SOCK_CLOEXEC, accept4); elsewhere fcntl sets them
// right after the call, which leaves a short window in which a fork + exec on
// another thread inherits the descriptor (deltafin starts no programs while
// serving). The portable forms are built on Linux too, so they are tested.
#pragma once

#include <poll.h>
#include <sys/socket.h>

namespace deltafin::platform {

// socket(2), non-blocking and close-on-exec. -1 with errno set on failure.
int open_socket(int family, int type, int protocol);
// accept(2) on a listening socket: the new connection, non-blocking and
// close-on-exec. -1 with errno set (EAGAIN / EWOULDBLOCK: nobody waiting).
int accept_connection(int listen_fd, sockaddr* addr, socklen_t* len);

// The same by the portable route (the plain call, then fcntl), whatever the system.
int open_socket_portable(int family, int type, int protocol);
int accept_connection_portable(int listen_fd, sockaddr* addr, socklen_t* len);

// send(2) flags that keep a write to a closed peer from raising SIGPIPE:
// MSG_NOSIGNAL where it exists. macOS lacks it (before recent SDKs); there the
// sockets made above carry SO_NOSIGPIPE instead, and this is 0.
#if defined(MSG_NOSIGNAL)
inline constexpr int kSendNoSignal = MSG_NOSIGNAL;
#else
inline constexpr int kSendNoSignal = 0;
#endif

// poll(2) events that report the peer's close while no data is pending:
// POLLRDHUP on Linux. Elsewhere 0: a readable socket whose recv returns 0
// says the same, one call later.
#if defined(POLLRDHUP)
inline constexpr short kPollPeerClosed = POLLRDHUP;
#else
inline constexpr short kPollPeerClosed = 0;
#endif

}  // namespace deltafin::platform
