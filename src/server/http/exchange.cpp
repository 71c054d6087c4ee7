#include "server/http/exchange.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>

#include "platform/socket.h"

namespace deltafin::http {

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Server Error";
  }
}

namespace {

std::string status_and_headers(int status, std::string_view content_type, const Headers& extra, bool keep_alive) {
  std::string s = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  if (!content_type.empty()) s.append("Content-Type: ").append(content_type).append("\r\n");
  for (const auto& [k, v] : extra) s.append(k).append(": ").append(v).append("\r\n");
  s += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  return s;
}

}  // namespace

std::string response_text(int status, std::string_view content_type, std::string_view body, const Headers& extra,
                          bool keep_alive) {
  std::string s = status_and_headers(status, content_type, extra, keep_alive);
  s.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n\r\n");
  s.append(body);
  return s;
}

Exchange::Exchange(int fd, Request request, std::string peer)
    : fd_(fd), request_(std::move(request)), peer_(std::move(peer)), keep_alive_(request_.keep_alive) {}

// The socket is non-blocking (the event loop's): send what it takes now,
// keep the rest.
void Exchange::push(std::string_view data) {
  if (failed_) return;
  unsent_.append(data);
  size_t at = 0;
  while (at < unsent_.size()) {
    const ssize_t n = ::send(fd_, unsent_.data() + at, unsent_.size() - at, platform::kSendNoSignal | MSG_DONTWAIT);
    if (n > 0) {
      at += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    failed_ = true;  // reset, or any other error: the client is gone
    unsent_.clear();
    return;
  }
  unsent_.erase(0, at);
}

void Exchange::respond(int status, std::string_view content_type, std::string_view body, const Headers& extra) {
  if (responded()) return;
  status_ = status;
  std::string text = response_text(status, content_type, body, extra, keep_alive_);
  if (request_.method == "HEAD") text.resize(text.size() - body.size());  // the length, not the bytes
  push(text);
  complete_ = !failed_;
}

bool Exchange::begin_stream(int status, std::string_view content_type, const Headers& extra) {
  if (responded()) return false;
  status_ = status;
  streaming_ = true;
  chunked_ = request_.minor_version >= 1;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the close ends the body
  std::string head = status_and_headers(status, content_type, extra, keep_alive_);
  head += chunked_ ? "Transfer-Encoding: chunked\r\n\r\n" : "\r\n";
  push(head);
  return !failed_;
}

bool Exchange::write(std::string_view data) {
  if (!streaming_ || data.empty()) return !failed_;
  if (chunked_) {
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string chunk = size;
    chunk.append(data).append("\r\n");
    push(chunk);
  } else {
    push(data);
  }
  if (unsent_.size() > kMaxUnsent) {  // the client is a megabyte behind: give up on it
    failed_ = true;
    unsent_.clear();
  }
  return !failed_;
}

void Exchange::end_stream() {
  if (!streaming_ || complete_) return;
  if (chunked_) push("0\r\n\r\n");
  complete_ = !failed_;
}

bool Exchange::peer_closed() const {
  if (failed_) return true;
  pollfd p{fd_, static_cast<short>(POLLIN | platform::kPollPeerClosed), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (platform::kPollPeerClosed | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    // Readable: either the next pipelined request (bytes) or an orderly close (0).
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

}  // namespace deltafin::http
