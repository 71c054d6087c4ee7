#include "server/http/connection_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "platform/socket.h"
#include "util/error.h"

namespace deltafin::http {

using Clock = std::chrono::steady_clock;

namespace {

using platform::kReadable;
using platform::kWritable;

// How long a connection whose request was refused keeps being read (and the
// bytes dropped) after its error response, so the client sees the response
// instead of a reset caused by unread data.
constexpr auto kDrainTime = std::chrono::milliseconds(1000);
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kMaxReadPerWake = 4 * kReadChunk;  // then the next connection's turn

std::string peer_name(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
    port = ntohs(in->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

// A small response written without waiting: it fits the socket buffer of a
// fresh connection; if it does not go out whole, the client loses only it.
void send_now(int fd, const std::string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, platform::kSendNoSignal | MSG_DONTWAIT);
    if (n > 0) at += static_cast<size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// A lane: worker threads taking jobs in arrival order.

class ConnectionLoop::Lane {
public:
  explicit Lane(size_t threads) {
    for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) threads_.emplace_back([this] { work(); });
  }
  ~Lane() { join(); }
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  // Runs what is queued, then ends the threads.
  void join() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }

private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool done_ = false;
  std::vector<std::thread> threads_;
};

// ---------------------------------------------------------------------------

struct ConnectionLoop::Connection {
  enum class Phase { Reading, Busy, Writing, Draining };
  int fd = -1;
  std::string peer;
  std::string in;  // bytes read and not yet parsed
  RequestParser parser;
  Phase phase = Phase::Reading;
  bool idle = false;            // waiting for a keep-alive request (idle_timeout until its first byte)
  bool continue_sent = false;   // 100 Continue written for this request
  Clock::time_point deadline;
  uint64_t held = 0;            // bytes counted in buffered_
  std::string out;              // Writing: what the last response still has to send
  bool close_after_write = false;
};

ConnectionLoop::ConnectionLoop(LoopOptions options, Handler handler, LaneChooser slow, ErrorBody error_body)
    : o_(options), handler_(std::move(handler)), slow_(std::move(slow)), error_body_(std::move(error_body)) {
  const platform::PollerBackend backend = o_.poller ? *o_.poller : platform::poller_backend_from_env();
  std::string why;
  poller_ = platform::make_poller(backend, &why);
  if (poller_) wakeup_ = platform::Wakeup::make(platform::wakeup_kind_for(backend), &why);
  if (!poller_ || !wakeup_) fail("serve: cannot create the event loop (", platform::poller_name(backend), "): ", why);
  if (!poller_->add(wakeup_->fd(), kReadable))
    fail("serve: cannot create the event loop: watching its wake-up: ", std::strerror(errno));
}

ConnectionLoop::~ConnectionLoop() {
  quick_.reset();
  slow_lane_.reset();
  for (auto& [fd, c] : conns_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

int ConnectionLoop::bind(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    fail("serve: cannot resolve --host ", host, ": ", gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = platform::open_socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only: a restart may take a port in TIME_WAIT, while a port
    // another server listens on stays an error (SO_REUSEPORT would split the
    // clients between the two).
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
      break;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) fail("serve: cannot listen on ", host, ":", port, " (", why, ")");
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&local), &len);
  const int bound = local.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port)
                                                 : ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  if (!poller_->add(listen_fd_, kReadable)) fail("serve: cannot watch the listening socket: ", std::strerror(errno));
  return bound;
}

void ConnectionLoop::wake() { wakeup_->signal(); }

void ConnectionLoop::stop() {
  stopping_.store(true);
  wake();
}

ConnectionLoop::Stats ConnectionLoop::stats() const {
  Stats s;
  s.open = open_.load();
  s.accepted = accepted_.load();
  s.refused = refused_.load();
  s.timeouts = timeouts_.load();
  s.protocol_errors = protocol_errors_.load();
  s.descriptor_pauses = descriptor_pauses_.load();
  s.buffered_bytes = buffered_now_.load();
  return s;
}

void ConnectionLoop::run() {
  if (listen_fd_ < 0) fail("serve: run() before bind()");
  quick_ = std::make_unique<Lane>(o_.quick_threads);
  slow_lane_ = std::make_unique<Lane>(o_.slow_threads);
  std::vector<platform::PollEvent> events;
  while (!stopping_.load()) {
    const int n = poller_->wait(next_timeout_ms(), &events);
    if (n < 0 && errno != EINTR) break;
    bool new_connections = false;
    for (const platform::PollEvent& ev : events) {
      const int fd = ev.fd;
      if (fd == wakeup_->fd()) {
        wakeup_->drain();
        continue;
      }
      if (fd == listen_fd_) {
        new_connections = true;
        continue;
      }
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;
      if (it->second->phase == Connection::Phase::Writing) on_writable(*it->second);
      else if (it->second->phase != Connection::Phase::Busy) on_readable(*it->second);
    }
    // Accepted after the batch's reads, whatever order the backend reports
    // them in (epoll: as they became ready; poll: as they are watched), so
    // the closes a batch brings free their places under --max-connections
    // before its new connections are counted.
    if (new_connections) accept_all();
    take_returned();
    check_deadlines();
  }
  // Shut down: no new connections; those not held by a worker are closed;
  // the workers finish what they hold (the handler sees the stop through its
  // own flag) and their connections are closed after them.
  poller_->remove(listen_fd_);  // fails harmlessly while accepting is paused
  ::close(listen_fd_);
  listen_fd_ = -1;
  std::vector<int> idle;
  for (auto& [fd, c] : conns_)
    if (c->phase != Connection::Phase::Busy) idle.push_back(fd);
  for (int fd : idle) close_connection(fd);
  quick_->join();
  slow_lane_->join();
  take_returned();
  std::vector<int> rest;
  for (auto& [fd, c] : conns_) rest.push_back(fd);
  for (int fd : rest) close_connection(fd);
}

void ConnectionLoop::accept_all() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = platform::accept_connection(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The listening socket stays readable while the backlog waits: stop
        // watching it for a moment instead of waking on it in a busy loop.
        descriptor_pauses_++;
        poller_->remove(listen_fd_);
        accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
        if (o_.log) std::fprintf(stderr, "serve: out of file descriptors; accepting again in 100 ms\n");
      }
      return;  // EAGAIN: the backlog is empty
    }
    if (conns_.size() >= o_.max_connections) {
      refused_++;
      send_now(fd, response_text(503, "application/json",
                                 error_body_(503,
                                             "Too many connections: the server holds " +
                                                 std::to_string(o_.max_connections) + " (--max-connections); retry later",
                                             "too_many_connections"),
                                 {{"Retry-After", "1"}}, false));
      ::close(fd);
      continue;
    }
    int yes = 1;
    // No Nagle: small responses and SSE events go out at once, not after a delayed ACK.
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->peer = peer_name(addr);
    c->parser = RequestParser(o_.request);
    c->deadline = Clock::now() + o_.header_timeout;
    if (!poller_->add(fd, kReadable)) {  // out of memory for the watch: as if never accepted
      ::close(fd);
      continue;
    }
    conns_[fd] = std::move(c);
    accepted_++;
    open_.store(conns_.size());
  }
}

void ConnectionLoop::account(Connection& c) {
  const uint64_t now_held = c.in.size() + c.parser.request().body.size();
  buffered_ = buffered_ - c.held + now_held;
  c.held = now_held;
  buffered_now_.store(buffered_);
}

void ConnectionLoop::on_readable(Connection& c) {
  char buf[kReadChunk];
  size_t got = 0;
  bool closed = false;
  while (got < kMaxReadPerWake) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      if (c.phase != Connection::Phase::Draining) c.in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    closed = true;  // orderly close (0) or an error
    break;
  }
  if (c.phase == Connection::Phase::Draining) {
    if (closed) close_connection(c.fd);
    return;
  }
  if (got > 0 && c.idle) {  // the next keep-alive request starts: the header deadline runs from here
    c.idle = false;
    c.deadline = Clock::now() + o_.header_timeout;
  }
  parse(c);  // never erases c: it answers (Draining) or dispatches (Busy)
  if (closed && c.phase == Connection::Phase::Reading) close_connection(c.fd);
}

void ConnectionLoop::parse(Connection& c) {
  const RequestParser::State before = c.parser.state();
  const RequestParser::State s = c.parser.consume(c.in);
  account(c);
  if (s == RequestParser::State::Failed) {
    const Error& e = c.parser.error();
    return answer_error(c, e.status, e.message, e.code);
  }
  if (buffered_ > o_.max_buffered_bytes) {
    refused_++;
    return answer_error(c, 503,
                        "The server holds too many request bytes from all clients at once (" +
                            std::to_string(o_.max_buffered_bytes) + "); retry later",
                        "server_busy");
  }
  if (s == RequestParser::State::Body && before == RequestParser::State::Head) c.deadline = Clock::now() + o_.body_timeout;
  if (s == RequestParser::State::Body && c.parser.request().expect_continue && !c.continue_sent) {
    c.continue_sent = true;
    send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
  }
  if (s == RequestParser::State::Done) dispatch(c);
}

void ConnectionLoop::dispatch(Connection& c) {
  c.phase = Connection::Phase::Busy;
  poller_->remove(c.fd);
  Request req = c.parser.take_request();
  // The body stays counted until the worker gives the connection back: a
  // queue of requests waiting for a worker holds their bodies too.
  buffered_ -= c.held;
  c.held = c.in.size() + req.body.size();
  buffered_ += c.held;
  buffered_now_.store(buffered_);
  const bool slow = slow_(req);
  const int fd = c.fd;
  auto job = [this, fd, peer = c.peer, req = std::move(req)]() mutable {
    Exchange ex(fd, std::move(req), std::move(peer));
    try {
      handler_(ex);
    } catch (...) {  // handlers answer their own errors; this is the last net
    }
    if (!ex.responded())
      ex.respond(500, "application/json", error_body_(500, "The server did not answer this request", "internal_error"));
    {
      std::lock_guard lock(returned_mu_);
      returned_.push_back({fd, ex.reusable(), ex.take_unsent()});
    }
    wake();
  };
  (slow ? slow_lane_ : quick_)->post(std::move(job));
}

// Answers an error the loop found itself, then drains and closes: the rest of
// a refused request is read and dropped for a moment so the client sees the
// answer instead of a reset.
void ConnectionLoop::answer_error(Connection& c, int status, const std::string& message, const std::string& code) {
  protocol_errors_++;
  if (o_.log) std::fprintf(stderr, "serve: %s: HTTP %d: %s\n", c.peer.c_str(), status, message.c_str());
  send_now(c.fd, response_text(status, "application/json", error_body_(status, message, code), {}, false));
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Connection::Phase::Draining;
  c.in.clear();
  c.in.shrink_to_fit();
  c.parser.reset();
  account(c);
  c.deadline = Clock::now() + kDrainTime;
}

void ConnectionLoop::close_connection(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  buffered_ -= it->second->held;
  buffered_now_.store(buffered_);
  if (it->second->phase != Connection::Phase::Busy) poller_->remove(fd);
  ::close(fd);
  conns_.erase(it);
  open_.store(conns_.size());
}

// Connections the workers are done with: their unsent bytes written, then
// closed or read again for the next request (which may already be waiting in
// `in`: pipelining). While stopping, none is read again.
void ConnectionLoop::take_returned() {
  std::vector<Returned> back;
  {
    std::lock_guard lock(returned_mu_);
    back.swap(returned_);
  }
  for (Returned& r : back) {
    auto it = conns_.find(r.fd);
    if (it == conns_.end()) continue;
    Connection& c = *it->second;
    const bool reusable = r.reusable && !stopping_.load();
    if (r.unsent.empty()) {
      if (reusable) start_reading(c);
      else close_connection(r.fd);
      continue;
    }
    c.phase = Connection::Phase::Writing;
    c.out = std::move(r.unsent);
    c.close_after_write = !reusable;
    c.deadline = Clock::now() + o_.write_timeout;
    poller_->add(r.fd, kWritable);
    on_writable(c);
  }
}

void ConnectionLoop::start_reading(Connection& c) {
  c.phase = Connection::Phase::Reading;
  c.parser.reset();
  c.continue_sent = false;
  c.idle = c.in.empty();
  c.deadline = Clock::now() + (c.idle ? o_.idle_timeout : o_.header_timeout);
  account(c);
  // Watched for writing after a long response, or not at all after a worker held it.
  if (!poller_->modify(c.fd, kReadable)) poller_->add(c.fd, kReadable);
  if (!c.in.empty()) parse(c);
}

// Sends what a finished response left; then reads on or closes.
void ConnectionLoop::on_writable(Connection& c) {
  size_t at = 0;
  while (at < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + at, c.out.size() - at, platform::kSendNoSignal | MSG_DONTWAIT);
    if (n > 0) {
      at += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return close_connection(c.fd);  // the client is gone
  }
  c.out.erase(0, at);
  if (!c.out.empty()) return;  // kWritable brings us back
  std::string().swap(c.out);
  if (c.close_after_write) return close_connection(c.fd);
  start_reading(c);
}

void ConnectionLoop::check_deadlines() {
  const auto now = Clock::now();
  if (accept_paused_until_ != Clock::time_point{} && now >= accept_paused_until_ && listen_fd_ >= 0) {
    accept_paused_until_ = {};
    poller_->add(listen_fd_, kReadable);
  }
  std::vector<int> late;
  for (auto& [fd, c] : conns_)
    if (c->phase != Connection::Phase::Busy && now >= c->deadline) late.push_back(fd);
  for (int fd : late) {
    Connection& c = *conns_[fd];
    if (c.phase == Connection::Phase::Draining || c.phase == Connection::Phase::Writing || c.idle ||
        (c.in.empty() && !c.parser.started())) {
      close_connection(fd);  // nothing asked: nothing to answer
      continue;
    }
    timeouts_++;
    const bool in_body = c.parser.state() == RequestParser::State::Body;
    const auto limit = in_body ? o_.body_timeout : o_.header_timeout;
    answer_error(c, 408,
                 std::string("The request's ") + (in_body ? "body" : "header block") + " did not arrive within " +
                     std::to_string(limit.count()) + " ms",
                 "request_timeout");
  }
}

int ConnectionLoop::next_timeout_ms() const {
  auto next = Clock::now() + std::chrono::seconds(1);
  // A paused accept resumes on time, not at the next wake (up to a second later).
  if (accept_paused_until_ != Clock::time_point{}) next = std::min(next, accept_paused_until_);
  for (const auto& [fd, c] : conns_)
    if (c->phase != Connection::Phase::Busy) next = std::min(next, c->deadline);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms + 1, 1, 1000));
}

}  // namespace deltafin::http
