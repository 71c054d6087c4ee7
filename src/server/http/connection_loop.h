// The HTTP server's sockets: one event-loop thread (platform/poller.h: epoll
// on Linux, poll(2) elsewhere or with DELTAFIN_POLLER=poll) accepts
// connections and reads every request to its end, under deadlines and
// limits, and only then hands it to a worker; workers write the responses.
//
// Why this shape (and not cpp-httplib, which deltafin used before): a
// thread-per-connection server that reads headers with a per-read timeout
// lets a few dozen clients that trickle their headers a byte at a time hold
// every thread, so /health and real requests starve. Here reading costs no
// thread, and each limit is a deadline or a byte count:
//   - the header block must arrive within header_timeout of its first byte
//     (a deadline for the whole block, not per read), the body within
//     body_timeout of the head, the next keep-alive request within
//     idle_timeout; a late client gets 408 and the close;
//   - request bytes are bounded per request (request_parser.h: head size and
//     field count, the body whatever its framing) and across all connections
//     (max_buffered_bytes, then 503 for the request that would cross it);
//   - at most max_connections are open; one more is answered 503 and closed;
//   - workers never wait on a socket (exchange.h): what the client has not
//     taken when a response is done is sent by the loop, within
//     write_timeout, before it reads the connection's next request;
//   - accept pauses for a moment when the process runs out of descriptors.
// Requests are served in order per connection (pipelining): the loop stops
// reading a connection while a worker answers its request, and parses what
// followed it afterwards. Two lanes of workers, chosen per request: `slow`
// (generation, which can wait its turn for minutes) and `quick` (health,
// models, errors), so a full generation line never delays /health.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "platform/poller.h"
#include "platform/wakeup.h"
#include "server/http/exchange.h"
#include "server/http/request_parser.h"

namespace deltafin::http {

struct LoopOptions {
  Limits request;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds idle_timeout{10'000};
  std::chrono::milliseconds write_timeout{30'000};
  size_t max_connections = 256;
  uint64_t max_buffered_bytes = 64ull << 20;
  size_t quick_threads = 2;
  size_t slow_threads = 12;
  bool log = true;  // protocol errors and timeouts, one line each on stderr
  // Unset: DELTAFIN_POLLER's choice, else this system's default (epoll on Linux).
  std::optional<platform::PollerBackend> poller;
};

// Runs one request: answers it through the exchange (a handler that does not
// answer gets a 500). Called on a worker thread.
using Handler = std::function<void(Exchange&)>;
// Which lane a request goes to: true = slow.
using LaneChooser = std::function<bool(const Request&)>;
// The JSON body of an error the loop answers itself (parse errors, timeouts,
// too many connections): status, message, code.
using ErrorBody = std::function<std::string(int status, const std::string& message, const std::string& code)>;

class ConnectionLoop {
public:
  ConnectionLoop(LoopOptions options, Handler handler, LaneChooser slow, ErrorBody error_body);
  ~ConnectionLoop();
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  // Binds and listens; returns the port (port 0: any free one). Throws deltafin::Error.
  int bind(const std::string& host, int port);
  // Serves until stop(); then stops accepting, closes idle connections and
  // waits for the workers to finish what they hold.
  void run();
  // From any thread (not from a signal handler): run() returns soon.
  void stop();

  struct Stats {
    size_t open = 0;                    // connections now
    uint64_t accepted = 0, refused = 0;  // refused: over max_connections or max_buffered_bytes
    uint64_t timeouts = 0, protocol_errors = 0;
    uint64_t descriptor_pauses = 0;      // accept paused: the process was out of descriptors
    uint64_t buffered_bytes = 0;         // request bytes held now
  };
  Stats stats() const;
  platform::PollerBackend poller_backend() const { return poller_->backend(); }

private:
  struct Connection;
  class Lane;

  struct Returned {
    int fd;
    bool reusable;
    std::string unsent;
  };

  void accept_all();
  void on_readable(Connection& c);
  void on_writable(Connection& c);
  void start_reading(Connection& c);
  void parse(Connection& c);
  void dispatch(Connection& c);
  void answer_error(Connection& c, int status, const std::string& message, const std::string& code);
  void close_connection(int fd);
  void take_returned();
  void check_deadlines();
  int next_timeout_ms() const;
  void account(Connection& c);
  void wake();

  LoopOptions o_;
  Handler handler_;
  LaneChooser slow_;
  ErrorBody error_body_;
  int listen_fd_ = -1;
  std::unique_ptr<platform::Poller> poller_;
  std::unique_ptr<platform::Wakeup> wakeup_;  // workers -> loop: a connection is back, or stop()
  std::atomic<bool> stopping_{false};
  std::map<int, std::unique_ptr<Connection>> conns_;  // loop thread only
  std::unique_ptr<Lane> quick_, slow_lane_;
  std::mutex returned_mu_;
  std::vector<Returned> returned_;  // from workers
  std::chrono::steady_clock::time_point accept_paused_until_{};  // out of descriptors: accept again after this
  uint64_t buffered_ = 0;
  std::atomic<size_t> open_{0};
  std::atomic<uint64_t> accepted_{0}, refused_{0}, timeouts_{0}, protocol_errors_{0}, buffered_now_{0};
  std::atomic<uint64_t> descriptor_pauses_{0};
};

}  // namespace deltafin::http
