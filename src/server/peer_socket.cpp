#include "server/peer_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace deltafin {

namespace {

// The numeric host and port of a socket address (IPv4 or IPv6).
bool host_port(const sockaddr_storage& a, std::string& host, int& port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    if (!inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf)) return false;
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    if (!inet_ntop(AF_INET6, &in->sin6_addr, buf, sizeof buf)) return false;
    port = ntohs(in->sin6_port);
  } else {
    return false;
  }
  host = buf;
  return true;
}

bool matches(int fd, int local_port, const std::string& remote_addr, int remote_port) {
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
  std::string lh, ph;
  int lp = 0, pp = 0;
  if (!host_port(local, lh, lp) || !host_port(peer, ph, pp)) return false;
  return lp == local_port && pp == remote_port && ph == remote_addr;
}

}  // namespace

PeerSocket::PeerSocket(int local_port, const std::string& remote_addr, int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = std::atoi(e->d_name);
    if (fd == dirfd(dir)) continue;
    if (matches(fd, local_port, remote_addr, remote_port)) {
      fd_ = fd;
      break;
    }
  }
  closedir(dir);
}

bool PeerSocket::closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    // Readable: either the next pipelined request (bytes) or an orderly close (0).
    char c;
    ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
  }
  return false;
}

}  // namespace deltafin
