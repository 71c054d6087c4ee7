// Test mirrors for the remote (HTTP) code: a real nginx serving a directory on
// a loopback port, and a fault-injecting proxy in front of any server.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace deltafin::test {

// nginx from Debian (/usr/sbin/nginx), one process (master_process off,
// daemon off), serving `root` at http://127.0.0.1:<port>/ with range
// requests, ETags and If-Match as nginx does for static files. The config,
// logs and pid live in a private temporary directory. Stopped (SIGTERM, then
// waited for) when the object dies; it also gets SIGTERM when the thread that
// started it exits (PR_SET_PDEATHSIG), so a crashed test leaves no nginx
// behind — start it from the thread that runs the test.
// nginx_available() is false when the binary is missing; tests then FAIL
// under CI=true and skip loudly otherwise.
bool nginx_available();

class NginxMirror {
public:
  explicit NginxMirror(const std::string& root);
  ~NginxMirror();
  NginxMirror(const NginxMirror&) = delete;
  NginxMirror& operator=(const NginxMirror&) = delete;
  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:<port>"
  // Number of requests in nginx's access log (one line per request). nginx
  // writes a line when it finishes a request, which can be just after the
  // client has the reply: wait_logged() waits for a count.
  size_t requests_logged() const;
  bool wait_logged(size_t requests, double timeout_s = 5.0) const;
  // Bytes of bodies sent, summed from the access log ($body_bytes_sent).
  uint64_t body_bytes_logged() const;

private:
  std::string dir_, root_;
  int port_ = 0;
  int pid_ = -1;
};

// What the proxy does to one request.
enum class Fault {
  None,          // forward faithfully
  Status500,     // answer 500 without forwarding
  Drop,          // close the connection without answering
  Truncate,      // forward the headers and half the body, then close
  WrongBytes,    // forward with one body byte flipped: the byte at body.size() / 2, XORed with 0xFF
  Stall,         // accept, send nothing for stall_s seconds, then close
  WrongLength,   // answer 206 with a body one byte shorter and a matching Content-Length
  LongBody,      // forward with one extra body byte (0x00) and a matching Content-Length
  ShiftedRange,  // forward with the Content-Range's first and last byte both one higher
  IgnoreRange,   // forward without the Range header: a 200 with the whole file, as a server
                 // that ignores ranges sends
};
// WrongBytes flips this byte of a body of `body_bytes` bytes.
inline size_t flipped_byte(size_t body_bytes) { return body_bytes / 2; }

// A plain-HTTP proxy on a loopback port that forwards every request to
// `upstream` (host:port) and applies faults chosen by a rule, so tests can
// say "the first 2 requests get 500" or "every request for this file gets
// wrong bytes". HTTP/1.1 keep-alive on the client side is supported (one
// request at a time per connection); each request is forwarded on a fresh
// upstream connection.
class FaultProxy {
public:
  // rule(n, request_line) -> the fault for the n-th request (0-based, all connections).
  using Rule = std::function<Fault(size_t n, const std::string& request_line)>;
  FaultProxy(int upstream_port, Rule rule);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;
  int port() const { return port_; }
  std::string url() const;
  size_t requests() const { return requests_.load(); }
  size_t connections() const { return connections_.load(); }  // client connections accepted
  void set_rule(Rule rule);
  double stall_s = 3.0;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<size_t> requests_{0};
  std::atomic<size_t> connections_{0};
};

}  // namespace deltafin::test
