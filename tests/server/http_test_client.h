// A tiny HTTP/1.1 client over raw POSIX sockets, for the server tests: it
// sends exactly the bytes it is given (so tests can send malformed requests,
// a request byte by byte, or vanish mid-response) and parses what comes back
// itself (status line, headers, a body framed by Content-Length, chunked
// encoding or the close), independently of the server's HTTP library.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace deltafin::test {

struct HttpResponse {
  int status = 0;                              // 0: no status line came back
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // chunked encoding removed
  bool complete = false;                       // the body ended as framed (not cut off)

  std::string header(const std::string& name) const;  // "" when absent (name in any case)
  nlohmann::json json() const;                        // parsed body; discarded (is_discarded()) when not JSON
};

// "METHOD path HTTP/1.1" with Host, Connection: close, the given headers and,
// when `body` is given, Content-Length (and Content-Type unless a header
// already names one).
std::string http_request_text(const std::string& method, const std::string& path,
                              const std::optional<std::string>& body,
                              const std::vector<std::pair<std::string, std::string>>& headers = {},
                              const std::string& content_type = "application/json");

class HttpConnection {
public:
  // Connects to 127.0.0.1:port; every read gives up after `timeout`.
  explicit HttpConnection(int port, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends all of `bytes`; false when the connection failed.
  bool send(std::string_view bytes);
  // Sends `bytes` one at a time with `gap` between them.
  bool send_slowly(std::string_view bytes, std::chrono::milliseconds gap);

  // Reads the status line and headers (once); false on timeout or close first.
  bool read_head(HttpResponse& r);
  // Reads the whole response: head, then the body until Content-Length,
  // the last chunk, or the server closing the connection.
  HttpResponse read_response();
  // Server-sent events: the payload of the next "data: ..." event (the text
  // after "data: "), read incrementally from the (chunked) body; nullopt when
  // the body ends or the read times out first. read_head() must come first.
  std::optional<std::string> next_event();
  // The SSE comment lines (": ...") next_event() has skipped so far.
  const std::vector<std::string>& comments() const { return comments_; }
  // Reads once (waiting up to the timeout for bytes) and takes the comments
  // of the complete comment-only events at the front of the body, leaving
  // the first data event for next_event(); returns comments().size().
  size_t poll_comments();
  // Forgets the response read so far (keeping bytes received after it), so
  // that read_head()/read_response() read the next response on the same
  // connection: a pipelined request's, or the final one after a 100 Continue.
  void next_response();
  // Closes the socket now (with a reset when `reset`: SO_LINGER 0).
  void close(bool reset = false);

private:
  bool fill();                      // one read into raw_; false on close, error or timeout
  bool decode_body(bool& finished);  // moves decodable body bytes from raw_ to body_

  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  std::string raw_;   // bytes received and not yet consumed
  std::string body_;  // decoded body bytes not yet consumed by next_event()
  std::vector<std::string> comments_;
  bool head_read_ = false, chunked_ = false, body_done_ = false, eof_ = false;
  std::optional<uint64_t> content_length_;
  uint64_t body_received_ = 0;
  uint64_t chunk_left_ = 0;  // bytes left in the current chunk (chunked)
  bool in_chunk_ = false;
  HttpResponse head_;
};

// One request on its own connection: send, read the whole response.
HttpResponse http_call(int port, const std::string& method, const std::string& path,
                       const std::optional<std::string>& body = std::nullopt,
                       const std::vector<std::pair<std::string, std::string>>& headers = {});

// True when `j` is {"error": {"message": string, "type": string,
// "param": string|null, "code": string|null}} and nothing else.
bool is_openai_error(const nlohmann::json& j);

}  // namespace deltafin::test
