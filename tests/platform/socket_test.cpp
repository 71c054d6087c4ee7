// The socket helpers, the system's form and the portable one (plain call,
// then fcntl) side by side: every descriptor they hand out is non-blocking
// and close-on-exec, checked with fcntl, and accept on an empty backlog says
// EAGAIN instead of waiting.
#include "platform/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace deltafin::platform {
namespace {

void expect_nonblocking_cloexec(int fd) {
  ASSERT_GE(fd, 0);
  const int fl = ::fcntl(fd, F_GETFL), fd_fl = ::fcntl(fd, F_GETFD);
  ASSERT_GE(fl, 0);
  ASSERT_GE(fd_fl, 0);
  EXPECT_TRUE(fl & O_NONBLOCK) << "fd " << fd << " blocks";
  EXPECT_TRUE(fd_fl & FD_CLOEXEC) << "fd " << fd << " survives exec";
}

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

using OpenFn = std::function<int(int, int, int)>;
using AcceptFn = std::function<int(int, sockaddr*, socklen_t*)>;

struct Route {
  const char* name;
  OpenFn open;
  AcceptFn accept;
};

std::vector<Route> routes() {
  return {{"system", open_socket, accept_connection},
          {"portable", open_socket_portable, accept_connection_portable}};
}

// A listening loopback socket made by `open`; *port gets its port.
int listen_loopback(const OpenFn& open, int* port) {
  const int fd = open(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

// A blocking client connected to port (loopback completes the handshake
// before connect returns, so the listener has it in its backlog).
int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(Socket, BothRoutesMakeNonBlockingCloseOnExecSockets) {
  for (const Route& r : routes()) {
    SCOPED_TRACE(r.name);
    Fd s(r.open(AF_INET, SOCK_STREAM, 0));
    expect_nonblocking_cloexec(s.fd);
  }
}

TEST(Socket, BothRoutesAcceptNonBlockingCloseOnExecConnections) {
  for (const Route& r : routes()) {
    SCOPED_TRACE(r.name);
    int port = 0;
    Fd listener(listen_loopback(r.open, &port));
    ASSERT_GE(listener.fd, 0) << std::strerror(errno);
    Fd client(connect_loopback(port));
    ASSERT_GE(client.fd, 0) << std::strerror(errno);
    pollfd p{listener.fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10'000), 1);  // generous: the connection is normally there already
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    Fd conn(r.accept(listener.fd, reinterpret_cast<sockaddr*>(&peer), &len));
    ASSERT_GE(conn.fd, 0) << std::strerror(errno);
    expect_nonblocking_cloexec(conn.fd);
    EXPECT_EQ(peer.ss_family, AF_INET);
    // The accepted socket carries bytes both ways.
    ASSERT_EQ(::send(client.fd, "hi", 2, 0), 2);
    pollfd c{conn.fd, POLLIN, 0};
    ASSERT_EQ(::poll(&c, 1, 10'000), 1);
    char buf[4] = {};
    EXPECT_EQ(::recv(conn.fd, buf, sizeof buf, 0), 2);
    EXPECT_EQ(std::string(buf, 2), "hi");
  }
}

TEST(Socket, AcceptOnAnEmptyBacklogSaysEagainAtOnce) {
  for (const Route& r : routes()) {
    SCOPED_TRACE(r.name);
    int port = 0;
    Fd listener(listen_loopback(r.open, &port));
    ASSERT_GE(listener.fd, 0);
    errno = 0;
    EXPECT_EQ(r.accept(listener.fd, nullptr, nullptr), -1);
    EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
  }
}

TEST(Socket, ASendToAClosedPeerFailsInsteadOfRaisingSigpipe) {
  // Without MSG_NOSIGNAL (or SO_NOSIGPIPE), this test process would die of SIGPIPE.
  for (const Route& r : routes()) {
    SCOPED_TRACE(r.name);
    int port = 0;
    Fd listener(listen_loopback(r.open, &port));
    ASSERT_GE(listener.fd, 0);
    Fd client(connect_loopback(port));
    ASSERT_GE(client.fd, 0);
    pollfd p{listener.fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10'000), 1);
    Fd conn(r.accept(listener.fd, nullptr, nullptr));
    ASSERT_GE(conn.fd, 0);
    ::close(client.fd);
    client.fd = -1;
    // The first send may still be taken (the reset comes back after it); a later one fails.
    ssize_t n = 0;
    for (int i = 0; i < 100 && n >= 0; ++i) {
      n = ::send(conn.fd, "x", 1, kSendNoSignal);
      if (n >= 0) {
        pollfd c{conn.fd, POLLIN, 0};
        ::poll(&c, 1, 100);  // wait for the reset
      }
    }
    EXPECT_EQ(n, -1);
    EXPECT_TRUE(errno == EPIPE || errno == ECONNRESET) << std::strerror(errno);
  }
}

}  // namespace
}  // namespace deltafin::platform
