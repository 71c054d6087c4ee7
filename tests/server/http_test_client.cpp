#include "server/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <thread>

namespace deltafin::test {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

}  // namespace

std::string HttpResponse::header(const std::string& name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? "" : it->second;
}

nlohmann::json HttpResponse::json() const { return nlohmann::json::parse(body, nullptr, false); }

std::string http_request_text(const std::string& method, const std::string& path, const std::optional<std::string>& body,
                              const std::vector<std::pair<std::string, std::string>>& headers,
                              const std::string& content_type) {
  std::string s = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  bool has_type = false;
  for (const auto& [k, v] : headers) {
    s += k + ": " + v + "\r\n";
    if (lower(k) == "content-type") has_type = true;
  }
  if (body) {
    if (!has_type && !content_type.empty()) s += "Content-Type: " + content_type + "\r\n";
    s += "Content-Length: " + std::to_string(body->size()) + "\r\n";
  }
  s += "\r\n";
  if (body) s += *body;
  return s;
}

HttpConnection::HttpConnection(int port, std::chrono::milliseconds timeout) : timeout_(timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // byte-by-byte sends go out one by one
  fd_ = fd;
}

HttpConnection::~HttpConnection() { close(); }

void HttpConnection::close(bool reset) {
  if (fd_ < 0) return;
  if (reset) {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  ::close(fd_);
  fd_ = -1;
}

bool HttpConnection::send(std::string_view bytes) {
  if (fd_ < 0) return false;
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool HttpConnection::send_slowly(std::string_view bytes, std::chrono::milliseconds gap) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!send(bytes.substr(i, 1))) return false;
    if (i + 1 < bytes.size()) std::this_thread::sleep_for(gap);
  }
  return true;
}

bool HttpConnection::fill() {
  if (fd_ < 0 || eof_) return false;
  pollfd p{fd_, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(timeout_.count()));
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;  // timeout or error
  char buf[16384];
  ssize_t n;
  do {
    n = ::recv(fd_, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    eof_ = true;  // orderly close, or a reset
    return false;
  }
  raw_.append(buf, static_cast<size_t>(n));
  return true;
}

bool HttpConnection::read_head(HttpResponse& r) {
  if (!head_read_) {
    size_t end;
    while ((end = raw_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return false;
    const std::string head = raw_.substr(0, end);
    raw_.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    // "HTTP/1.1 200 OK"
    const size_t sp = status_line.find(' ');
    if (status_line.rfind("HTTP/1.", 0) != 0 || sp == std::string::npos) return false;
    head_.status = std::atoi(status_line.c_str() + sp + 1);
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      const std::string line = head.substr(pos, e - pos);
      pos = e + 2;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      head_.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
    }
    chunked_ = lower(head_.header("Transfer-Encoding")).find("chunked") != std::string::npos;
    const std::string cl = head_.header("Content-Length");
    if (!chunked_ && !cl.empty()) content_length_ = std::stoull(cl);
    head_read_ = true;
  }
  r.status = head_.status;
  r.headers = head_.headers;
  return true;
}

bool HttpConnection::decode_body(bool& finished) {
  finished = false;
  if (!chunked_) {
    if (content_length_) {
      const uint64_t want = *content_length_ - body_received_;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(want, raw_.size()));
      body_.append(raw_, 0, take);
      raw_.erase(0, take);
      body_received_ += take;
      finished = body_received_ == *content_length_;
    } else {
      body_ += raw_;
      raw_.clear();
      finished = eof_;  // framed by the close
    }
    return true;
  }
  for (;;) {
    if (!in_chunk_) {
      const size_t e = raw_.find("\r\n");
      if (e == std::string::npos) return true;  // the size line is not complete yet
      std::string line = raw_.substr(0, e);
      line = line.substr(0, line.find(';'));
      if (trim(line).empty()) return false;
      size_t used = 0;
      uint64_t size = 0;
      try {
        size = std::stoull(trim(line), &used, 16);
      } catch (...) {
        return false;
      }
      if (size == 0) {
        raw_.erase(0, e + 2);
        finished = true;  // the last chunk (trailers, if any, are not read)
        return true;
      }
      // Wait for the whole line, then consume it.
      raw_.erase(0, e + 2);
      chunk_left_ = size;
      in_chunk_ = true;
    }
    const size_t take = static_cast<size_t>(std::min<uint64_t>(chunk_left_, raw_.size()));
    body_.append(raw_, 0, take);
    raw_.erase(0, take);
    chunk_left_ -= take;
    if (chunk_left_ > 0) return true;
    if (raw_.size() < 2) return true;  // the CRLF after the chunk's data is not here yet
    if (raw_.compare(0, 2, "\r\n") != 0) return false;
    raw_.erase(0, 2);
    in_chunk_ = false;
  }
}

void HttpConnection::next_response() {
  head_read_ = chunked_ = body_done_ = in_chunk_ = false;
  content_length_.reset();
  body_received_ = chunk_left_ = 0;
  body_.clear();
  head_ = HttpResponse();
  // The blank line after a chunked body's last chunk (trailers are not read).
  while (raw_.rfind("\r\n", 0) == 0) raw_.erase(0, 2);
}

HttpResponse HttpConnection::read_response() {
  HttpResponse r;
  if (!read_head(r)) return r;
  for (;;) {
    bool finished = false;
    if (!decode_body(finished)) break;
    if (finished) {
      r.complete = true;
      break;
    }
    if (!fill()) {
      if (eof_ && !chunked_ && !content_length_) r.complete = true;  // close-delimited body
      break;
    }
  }
  r.body = std::move(body_);
  body_.clear();
  return r;
}

std::optional<std::string> HttpConnection::next_event() {
  if (!head_read_) return std::nullopt;
  for (;;) {
    const size_t e = body_.find("\n\n");
    if (e != std::string::npos) {
      const std::string event = body_.substr(0, e);
      body_.erase(0, e + 2);
      std::string data;
      bool has_data = false;
      size_t pos = 0;
      while (pos <= event.size()) {
        size_t le = event.find('\n', pos);
        if (le == std::string::npos) le = event.size();
        const std::string line = event.substr(pos, le - pos);
        pos = le + 1;
        if (line.rfind(":", 0) == 0) comments_.push_back(line);
        if (line.rfind("data:", 0) == 0) {
          std::string v = line.substr(5);
          if (!v.empty() && v[0] == ' ') v.erase(0, 1);
          if (has_data) data += "\n";
          data += v;
          has_data = true;
        }
      }
      if (has_data) return data;
      continue;  // a comment or an empty event
    }
    if (body_done_) return std::nullopt;
    bool finished = false;
    if (!decode_body(finished)) return std::nullopt;
    if (finished) {
      body_done_ = true;
      continue;
    }
    if (body_.find("\n\n") != std::string::npos) continue;
    if (!fill()) {
      decode_body(finished);
      body_done_ = true;
    }
  }
}

size_t HttpConnection::poll_comments() {
  if (!head_read_) return comments_.size();
  bool finished = false;
  if (!body_done_ && decode_body(finished) && !finished && body_.find("\n\n") == std::string::npos && fill())
    decode_body(finished);
  for (size_t e = body_.find("\n\n"); e != std::string::npos; e = body_.find("\n\n")) {
    const std::string event = body_.substr(0, e + 1);
    if (event.find("data:") == 0 || event.find("\ndata:") != std::string::npos) break;  // next_event() takes it
    for (size_t pos = 0, le; (le = event.find('\n', pos)) != std::string::npos; pos = le + 1) {
      const std::string line = event.substr(pos, le - pos);
      if (line.rfind(":", 0) == 0) comments_.push_back(line);
    }
    body_.erase(0, e + 2);
  }
  return comments_.size();
}

HttpResponse http_call(int port, const std::string& method, const std::string& path, const std::optional<std::string>& body,
                       const std::vector<std::pair<std::string, std::string>>& headers) {
  HttpConnection c(port);
  if (!c.connected() || !c.send(http_request_text(method, path, body, headers))) return {};
  return c.read_response();
}

bool is_openai_error(const nlohmann::json& j) {
  if (!j.is_object() || j.size() != 1 || !j.contains("error")) return false;
  const auto& e = j["error"];
  if (!e.is_object() || e.size() != 4) return false;
  for (const char* k : {"message", "type", "param", "code"})
    if (!e.contains(k)) return false;
  if (!e["message"].is_string() || e["message"].get<std::string>().empty()) return false;
  if (!e["type"].is_string() || e["type"].get<std::string>().empty()) return false;
  return (e["param"].is_null() || e["param"].is_string()) && (e["code"].is_null() || e["code"].is_string());
}

}  // namespace deltafin::test
