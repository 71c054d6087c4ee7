// Noticing that an HTTP client went away. cpp-httplib gives a handler no
// socket, so the connection's descriptor is found by its address pair
// (local port, peer address and port) among this process's descriptors, once
// per request; afterwards a zero-timeout poll tells whether the peer closed.
#pragma once

#include <string>

namespace deltafin {

class PeerSocket {
public:
  // -1 when not found (then closed() is always false: the server falls back
  // to noticing failed writes).
  PeerSocket(int local_port, const std::string& remote_addr, int remote_port);

  // True once the peer has closed or reset the connection. Never blocks.
  bool closed() const;
  int fd() const { return fd_; }

private:
  int fd_ = -1;
};

}  // namespace deltafin
