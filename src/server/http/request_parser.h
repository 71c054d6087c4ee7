// An incremental HTTP/1.0 and HTTP/1.1 request parser with hard limits, for
// `deltafin serve` (server/http/connection_loop.h feeds it whatever bytes a
// socket gave). It is a pure state machine over bytes — no sockets, no clock —
// so it is unit-tested byte by byte (tests/server/request_parser_test.cpp)
// and fuzzed (fuzz/http_fuzz.cpp).
//
// What it enforces, before anything is buffered beyond the limit:
// - the whole header block (request line + fields, or the trailer block of a
//   chunked body) is at most `max_head_bytes`, with at most `max_headers`
//   fields: 431 otherwise;
// - the body is at most `max_body_bytes` whatever its framing: a
//   Content-Length above it is refused as soon as the head is read, a chunked
//   body as soon as a chunk size would cross it (413);
// - framing is unambiguous: Content-Length and Transfer-Encoding together, two
//   different Content-Lengths, a Transfer-Encoding other than `chunked`, or a
//   malformed chunk are 400 (the classic request-smuggling shapes);
// - compressed bodies are refused: a Content-Encoding other than `identity`
//   is 415 (inflating would need a second limit; nothing the API takes is big
//   enough to need compression);
// - the request target is origin-form (or absolute-form, whose path is used);
//   its path is percent-decoded, and an invalid escape, a decoded NUL or
//   decoded bytes that are not UTF-8 are 400 naming the path — so no handler
//   ever sees bytes it cannot put in a JSON error message;
// - field names are tokens; field values are visible ASCII, space, tab or
//   UTF-8 (kept as it is); control bytes and bytes that are not UTF-8 are a
//   400 naming the header (RFC 9110's obs-text is narrowed to UTF-8, so any
//   value can be quoted back in a JSON error).
// Errors carry the status, a message naming where, and a machine code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deltafin::http {

struct Limits {
  size_t max_head_bytes = 64 * 1024;  // request line + header fields (and, separately, a trailer block)
  size_t max_headers = 100;           // header fields (and trailer fields)
  uint64_t max_body_bytes = 8ull << 20;
};

struct Request {
  std::string method;
  std::string target;  // as sent
  std::string path;    // percent-decoded, valid UTF-8, no NUL
  std::string query;   // after '?', raw (not decoded)
  int minor_version = 1;                                    // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed, in order
  std::string body;
  bool keep_alive = true;       // the connection may carry another request after this one
  bool expect_continue = false; // "Expect: 100-continue" (HTTP/1.1)
  bool chunked = false;         // the body came with Transfer-Encoding: chunked

  // The first value of a header (name in any case), or nullopt.
  std::optional<std::string> header(std::string_view name) const;
};

struct Error {
  int status = 400;
  std::string message;  // valid UTF-8, names the place ("the request line", "header 'Content-Length'")
  std::string code;     // "bad_request", "header_too_large", "request_too_large", "unsupported_encoding", ...
};

class RequestParser {
public:
  enum class State { Head, Body, Done, Failed };

  explicit RequestParser(Limits limits = {}) : limits_(limits) {}

  // Parses as much of `in` as it can, erasing the bytes it used (whatever
  // follows a complete request stays in `in`: the next pipelined request).
  // Returns the new state; once Done or Failed it consumes nothing more.
  State consume(std::string& in);

  State state() const { return state_; }
  // The head has been read and the body is still to come (a 100 Continue is due).
  bool awaiting_body() const { return state_ == State::Body; }
  // Bytes of the current request seen so far (head and body).
  uint64_t bytes_seen() const { return seen_; }
  bool started() const { return seen_ > 0; }
  const Request& request() const { return req_; }
  Request take_request() { return std::move(req_); }
  const Error& error() const { return error_; }

  // Ready for the next request on the same connection.
  void reset();

private:
  enum class BodyMode { None, Length, Chunked };
  enum class ChunkStep { Size, Data, DataEnd, Trailers };

  bool parse_head(std::string& in);
  // The body from in[at...]; `at` moves past what was used.
  bool parse_body(const std::string& in, size_t& at);
  bool parse_chunked(const std::string& in, size_t& at);
  bool finish_head(std::string_view head);
  bool fail(int status, std::string message, std::string code);
  // One line (without its CRLF or LF) from in[at...], or nullopt when none
  // is complete yet; counts against `budget` and fails when over it.
  std::optional<std::string> take_line(const std::string& in, size_t& at, size_t budget, const char* what);

  Limits limits_;
  State state_ = State::Head;
  Request req_;
  Error error_;
  uint64_t seen_ = 0;
  size_t scanned_ = 0;     // head bytes already searched for the blank line
  size_t head_lines_ = 0;  // line ends among them
  BodyMode body_mode_ = BodyMode::None;
  uint64_t body_left_ = 0;
  ChunkStep chunk_step_ = ChunkStep::Size;
  size_t trailer_bytes_ = 0, trailer_count_ = 0;
};

// Percent-decodes a path; nullopt (and `why`) for an invalid escape, a NUL
// byte or bytes that are not valid UTF-8 after decoding.
std::optional<std::string> decode_path(std::string_view raw, std::string& why);

// True when `s` is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF):
// tokenizer/utf8.h's check, the project's one definition.
bool valid_utf8(std::string_view s);

// `s` with every byte that is not printable ASCII written as \xHH, clipped to
// `max` bytes: safe to log and to quote in a JSON message.
std::string printable(std::string_view s, size_t max = 200);

}  // namespace deltafin::http
