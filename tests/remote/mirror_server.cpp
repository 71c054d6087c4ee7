#include "remote/mirror_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "util/error.h"

namespace deltafin::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kNginx = "/usr/sbin/nginx";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) fail("cannot write ", path);
}

std::string make_temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  if (!::mkdtemp(tmpl.data())) fail("mkdtemp ", tmpl, ": ", std::strerror(errno));
  return tmpl;
}

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A socket listening on 127.0.0.1:port (0 = any free port).
int listen_on(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket: ", std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = loopback(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    fail("listen on 127.0.0.1:", port, ": ", std::strerror(e));
  }
  return fd;
}

int port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) fail("getsockname: ", std::strerror(errno));
  return ntohs(a.sin_port);
}

// A port that was free a moment ago (nginx binds it next; a race with another
// process is caught by the caller's retry).
int free_port() {
  const int fd = listen_on(0);
  const int port = port_of(fd);
  ::close(fd);
  return port;
}

// A connected socket to 127.0.0.1:port, or -1.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// ---------------------------------------------------------------- nginx

// The smallest config that serves `root` as static files: one process, all
// files nginx writes (pid, logs, temp dirs it insists on creating) inside
// `dir`, so it runs unprivileged and leaves nothing behind.
std::string nginx_conf(const std::string& dir, const std::string& root, int port) {
  auto q = [](const std::string& path) { return "\"" + path + "\""; };
  std::ostringstream c;
  c << "daemon off;\n"
    << "master_process off;\n"
    << "worker_processes 1;\n"
    << "pid " << q(dir + "/nginx.pid") << ";\n"
    << "error_log " << q(dir + "/error.log") << " info;\n"
    << "events { worker_connections 256; }\n"
    << "http {\n"
    << "  types { }\n"
    << "  default_type application/octet-stream;\n"
    // $body_bytes_sent first, so body_bytes_logged() reads one number a line.
    << "  log_format mirror '$body_bytes_sent $status \"$request\" \"$http_range\"';\n"
    << "  access_log " << q(dir + "/access.log") << " mirror;\n"
    << "  client_body_temp_path " << q(dir + "/client_body") << ";\n"
    << "  proxy_temp_path " << q(dir + "/proxy") << ";\n"
    << "  fastcgi_temp_path " << q(dir + "/fastcgi") << ";\n"
    << "  uwsgi_temp_path " << q(dir + "/uwsgi") << ";\n"
    << "  scgi_temp_path " << q(dir + "/scgi") << ";\n"
    << "  keepalive_requests 100000;\n"
    << "  server {\n"
    << "    listen 127.0.0.1:" << port << ";\n"
    << "    root " << q(root) << ";\n"
    << "  }\n"
    << "}\n";
  return c.str();
}

// fork + exec of nginx; its stdout/stderr go to `out_path`.
int spawn(const std::vector<std::string>& args, const std::string& out_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) fail("open ", out_path, ": ", std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls here: the test process has threads.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // no orphaned nginx if the test dies
    if (::getppid() != parent) ::_exit(126);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  const int e = errno;
  ::close(out);
  if (pid < 0) fail("fork: ", std::strerror(e));
  return pid;
}

// SIGTERM (nginx's fast shutdown), then SIGKILL if it lingers; always reaped.
void stop_process(int pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

bool nginx_available() { return ::access(kNginx, X_OK) == 0; }

NginxMirror::NginxMirror(const std::string& root) : root_(fs::absolute(root).string()) {
  dir_ = make_temp_dir("deltafin-nginx-");
  // The port is free when chosen but another process may take it before nginx
  // binds it: then nginx exits with "Address already in use" and we try again.
  std::string why;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    port_ = free_port();
    write_text(dir_ + "/nginx.conf", nginx_conf(dir_, root_, port_));
    fs::remove(dir_ + "/error.log");
    pid_ = spawn({kNginx, "-p", dir_ + "/", "-c", dir_ + "/nginx.conf", "-e", dir_ + "/error.log"},
                 dir_ + "/nginx.out");
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    int status = 0;
    for (;;) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        why = cat("it exited (", WIFEXITED(status) ? cat("status ", WEXITSTATUS(status)) : cat("signal ", WTERMSIG(status)),
                  ")");
        break;
      }
      if (const int fd = connect_to(port_); fd >= 0) {
        ::close(fd);
        return;
      }
      if (Clock::now() > deadline) {
        why = "port not accepting connections after 10 s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop_process(pid_);
    pid_ = -1;
    const std::string log = read_text(dir_ + "/error.log") + read_text(dir_ + "/nginx.out");
    why += cat("; its error log:\n", log);
    if (log.find("Address already in use") == std::string::npos) break;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
  fail(kNginx, " did not start serving ", root_, " on 127.0.0.1:", port_, ": ", why);
}

NginxMirror::~NginxMirror() {
  stop_process(pid_);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string NginxMirror::url() const { return cat("http://127.0.0.1:", port_); }

size_t NginxMirror::requests_logged() const {
  const std::string log = read_text(dir_ + "/access.log");
  size_t lines = 0;
  for (char c : log) lines += c == '\n';
  return lines;
}

bool NginxMirror::wait_logged(size_t requests, double timeout_s) const {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (requests_logged() < requests) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

uint64_t NginxMirror::body_bytes_logged() const {
  std::istringstream log(read_text(dir_ + "/access.log"));
  uint64_t total = 0;
  std::string line;
  while (std::getline(log, line)) total += std::strtoull(line.c_str(), nullptr, 10);
  return total;
}

// ---------------------------------------------------------------- proxy

namespace {

// An HTTP/1.1 message head (start line + headers) and body.
struct Message {
  std::string start;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  static Message parse(const std::string& head) {
    Message m;
    std::istringstream in(head);
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    m.start = line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const size_t value = line.find_first_not_of(' ', colon + 1);
      m.headers.emplace_back(line.substr(0, colon), value == std::string::npos ? "" : line.substr(value));
    }
    return m;
  }

  static bool same_name(const std::string& a, const std::string& b) { return ::strcasecmp(a.c_str(), b.c_str()) == 0; }

  const std::string* get(const std::string& name) const {
    for (const auto& [n, v] : headers)
      if (same_name(n, name)) return &v;
    return nullptr;
  }
  void remove(const std::string& name) {
    std::erase_if(headers, [&](const auto& h) { return same_name(h.first, name); });
  }
  void set(const std::string& name, const std::string& value) {
    remove(name);
    headers.emplace_back(name, value);
  }
  std::string head() const {
    std::string out = start + "\r\n";
    for (const auto& [n, v] : headers) out += n + ": " + v + "\r\n";
    return out + "\r\n";
  }
};

// "bytes a-b/t" -> "bytes a+1-b+1/t"; anything else is left as it is.
std::string shift_content_range(const std::string& v) {
  unsigned long long a = 0, b = 0;
  char total[64] = {};
  if (std::sscanf(v.c_str(), "bytes %llu-%llu/%63s", &a, &b, total) != 3) return v;
  return cat("bytes ", a + 1, "-", b + 1, "/", total);
}

}  // namespace

struct FaultProxy::Impl {
  FaultProxy& owner;
  const int upstream_port;
  int listen_fd = -1;
  std::thread acceptor;

  std::mutex mu;  // guards all below
  Rule rule;
  bool stopping = false;
  std::set<int> open_fds;  // client and upstream sockets, shut down by stop()
  std::vector<std::thread> connections;
  std::condition_variable stop_cv;  // wakes stalls

  Impl(FaultProxy& o, int upstream, Rule r) : owner(o), upstream_port(upstream), rule(std::move(r)) {}

  void start() {
    listen_fd = listen_on(0);
    owner.port_ = port_of(listen_fd);
    acceptor = std::thread([this] { accept_loop(); });
  }

  // Shutting the sockets down wakes every thread blocked on them; then all
  // threads end on their own and are joined.
  void stop() {
    {
      std::lock_guard lock(mu);
      stopping = true;
      for (int fd : open_fds) ::shutdown(fd, SHUT_RDWR);
    }
    stop_cv.notify_all();
    ::shutdown(listen_fd, SHUT_RDWR);  // accept() returns (EINVAL on Linux)
    if (acceptor.joinable()) acceptor.join();
    ::close(listen_fd);
    for (std::thread& t : connections) t.join();  // the acceptor is gone: no new ones
  }

  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      const int err = errno;
      {
        std::lock_guard lock(mu);
        if (stopping) {
          if (fd >= 0) ::close(fd);
          return;
        }
        if (fd >= 0) {
          ++owner.connections_;
          open_fds.insert(fd);
          connections.emplace_back([this, fd] { serve(fd); });
          continue;
        }
      }
      // EINTR or ECONNABORTED pass; anything else (EMFILE) may last: no spinning.
      if (err != EINTR && err != ECONNABORTED) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Registers a socket so stop() can shut it down; false when stopping.
  bool track(int fd) {
    std::lock_guard lock(mu);
    if (stopping) return false;
    open_fds.insert(fd);
    return true;
  }
  void close_tracked(int fd) {
    std::lock_guard lock(mu);
    open_fds.erase(fd);
    ::close(fd);
  }

  // One request head (GET/HEAD have no body) from `buffer` + the socket;
  // bytes after it stay in `buffer` for the next request.
  static bool read_head(int fd, std::string& buffer, std::string* head) {
    size_t end;
    while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (buffer.size() > (64 << 10)) return false;
      char chunk[4096];
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buffer.append(chunk, static_cast<size_t>(n));
    }
    *head = buffer.substr(0, end + 4);
    buffer.erase(0, end + 4);
    return true;
  }

  void serve(int client) {
    std::string buffer, head;
    while (read_head(client, buffer, &head)) {
      const Message request = Message::parse(head);
      Rule r;
      {
        std::lock_guard lock(mu);
        r = rule;
      }
      const size_t n = owner.requests_++;
      const Fault fault = r ? r(n, request.start) : Fault::None;
      if (!answer(client, request, fault)) break;
    }
    close_tracked(client);
  }

  // Sends the request to the upstream on a fresh connection and reads the
  // whole reply (the upstream closes after it: "Connection: close").
  bool forward(Message request, std::string* reply) {
    request.remove("Connection");
    request.remove("Keep-Alive");
    request.set("Connection", "close");
    const int fd = connect_to(upstream_port);
    if (fd < 0) return false;
    if (!track(fd)) return ::close(fd), false;
    bool ok = send_all(fd, request.head());
    char chunk[64 << 10];
    for (ssize_t n; ok && (n = ::recv(fd, chunk, sizeof chunk, 0)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ok = false;
      else reply->append(chunk, static_cast<size_t>(n));
    }
    close_tracked(fd);
    return ok;
  }

  // Changes the upstream's reply as the fault says.
  static void damage(Message& reply, Fault fault) {
    const auto set_length = [&] { reply.set("Content-Length", std::to_string(reply.body.size())); };
    if (fault == Fault::ShiftedRange) {
      if (const std::string* cr = reply.get("Content-Range")) reply.set("Content-Range", shift_content_range(*cr));
      return;
    }
    if (reply.body.empty()) return;  // HEAD, or an empty file: no body to damage
    switch (fault) {
      case Fault::WrongBytes:
        reply.body[flipped_byte(reply.body.size())] ^= static_cast<char>(0xFF);
        break;
      case Fault::WrongLength:
        reply.body.pop_back();
        set_length();
        break;
      case Fault::LongBody:
        reply.body.push_back('\0');
        set_length();
        break;
      default:
        break;
    }
  }

  // Answers one request; false when the connection is to be closed.
  bool answer(int client, const Message& request, Fault fault) {
    switch (fault) {
      case Fault::Status500:
        return send_all(client,
                        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 17\r\n\r\n"
                        "fault proxy: 500\n");
      case Fault::Drop:
        return false;
      case Fault::Stall: {
        std::unique_lock lock(mu);
        stop_cv.wait_for(lock, std::chrono::duration<double>(owner.stall_s), [this] { return stopping; });
        return false;
      }
      default:
        break;
    }
    Message forwarded = request;
    if (fault == Fault::IgnoreRange) forwarded.remove("Range");
    std::string raw;
    const size_t split = forward(forwarded, &raw) ? raw.find("\r\n\r\n") : std::string::npos;
    if (split == std::string::npos) {
      send_all(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return false;
    }
    Message reply = Message::parse(raw.substr(0, split + 4));
    reply.body = raw.substr(split + 4);
    // The upstream said "Connection: close" because we asked it to; the
    // client's connection stays open when the reply is framed by a length.
    reply.remove("Connection");
    reply.remove("Keep-Alive");
    const bool framed = reply.get("Content-Length") || reply.get("Transfer-Encoding");
    if (!framed) reply.set("Connection", "close");
    damage(reply, fault);
    if (fault == Fault::Truncate) {
      send_all(client, reply.head() + reply.body.substr(0, reply.body.size() / 2));
      return false;
    }
    return send_all(client, reply.head() + reply.body) && framed;
  }
};

FaultProxy::FaultProxy(int upstream_port, Rule rule)
    : impl_(std::make_unique<Impl>(*this, upstream_port, std::move(rule))) {
  impl_->start();
}

FaultProxy::~FaultProxy() { impl_->stop(); }

std::string FaultProxy::url() const { return cat("http://127.0.0.1:", port_); }

void FaultProxy::set_rule(Rule rule) {
  std::lock_guard lock(impl_->mu);
  impl_->rule = std::move(rule);
}

}  // namespace deltafin::test
