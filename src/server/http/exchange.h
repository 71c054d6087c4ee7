// One request and its response on a connection, handed to a handler on a
// worker thread (server/http/connection_loop.h). The handler answers with one
// whole response, or streams one: chunked for HTTP/1.1, delimited by the close
// for HTTP/1.0 (which has no chunked encoding).
//
// Writes never block the worker: what the socket does not take at once is
// kept, sent on the next write, and whatever is left when the handler ends
// goes back to the event loop with the connection, which sends it (under the
// write timeout) before it reads the next pipelined request. So a client
// that reads slowly, or not at all, costs its own bytes and never a thread
// or the generation slot: a stream whose unsent bytes pass kMaxUnsent (the
// client is that far behind) fails, and its generation is cancelled.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http/request_parser.h"

namespace deltafin::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

const char* reason_phrase(int status);

// "HTTP/1.1 <status> <reason>", the headers, Content-Length, Connection, and the body.
std::string response_text(int status, std::string_view content_type, std::string_view body, const Headers& extra,
                          bool keep_alive);

class Exchange {
public:
  static constexpr size_t kMaxUnsent = 1 << 20;

  Exchange(int fd, Request request, std::string peer);

  const Request& request() const { return request_; }
  const std::string& peer() const { return peer_; }

  // A whole response (Content-Length framed; no body bytes for HEAD).
  void respond(int status, std::string_view content_type, std::string_view body, const Headers& extra = {});
  // A streamed response: begin, any number of writes, end. False once the
  // client is gone (or does not read within the write timeout).
  bool begin_stream(int status, std::string_view content_type, const Headers& extra = {});
  bool write(std::string_view data);
  void end_stream();

  // The client is gone: nothing is written, the connection is closed, and
  // the request is logged with nginx's 499 ("client closed request").
  void abandon() {
    if (!responded()) status_ = 499;
    failed_ = true;
  }

  // True once the client has closed or reset its side. Never blocks; bytes
  // of a pipelined next request do not count as a close.
  bool peer_closed() const;

  int status() const { return status_; }
  bool responded() const { return status_ != 0; }
  // The connection can carry the next request: keep-alive was asked for and
  // allowed, the response was complete and every byte of it was written.
  bool reusable() const { return keep_alive_ && complete_ && !failed_; }
  // The bytes the socket has not taken yet (the loop sends them); empty once
  // the client is gone.
  std::string take_unsent() { return failed_ ? std::string() : std::move(unsent_); }

private:
  // Appends to the unsent bytes and sends what the socket takes now.
  void push(std::string_view data);

  int fd_;
  Request request_;
  std::string peer_;
  std::string unsent_;
  bool keep_alive_;
  int status_ = 0;
  bool streaming_ = false, chunked_ = false, complete_ = false, failed_ = false;
};

}  // namespace deltafin::http
