// libFuzzer target: the incremental HTTP/1.x request parser
// (server/http/request_parser.h).
//
// The input bytes are what a client sent on one connection. They are fed to a
// RequestParser three ways: all at once, one byte at a time, and in pieces
// whose sizes come from the first input bytes; after each Done request the
// parser is reset and goes on with what is left (pipelining), until the input
// is used up or the parser fails. Every way must give the same sequence of
// outcomes — each Done request's fields, or the same Error status and code,
// and the same unfinished state at the end — since a server's answer must not
// depend on how the bytes were split into reads.
//
// Each outcome must also keep the parser's promises: a Done path is valid
// UTF-8 without NUL, a Done body is within max_body_bytes, header names are
// lower-case tokens and values hold no control bytes and are UTF-8, every Error message is
// valid UTF-8, bytes_seen() never goes down within a request, and Done/Failed
// consume nothing more. Any broken promise aborts, as does a crash or a
// sanitizer report.
//
// Run with scripts/fuzz.sh; the seed corpus is fuzz/corpus/http/, the
// dictionary fuzz/http.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http/request_parser.h"

namespace {

using deltafin::http::Limits;
using deltafin::http::printable;
using deltafin::http::Request;
using deltafin::http::RequestParser;
using deltafin::http::valid_utf8;
using State = RequestParser::State;

// Small, so that every limit is reachable from a short input.
Limits limits() {
  Limits l;
  l.max_head_bytes = 1024;
  l.max_headers = 16;
  l.max_body_bytes = 2048;
  return l;
}

[[noreturn]] void bad(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "request parser breaks its contract: %s %s\n", what, detail.c_str());
  std::abort();
}

// What one request came to: Done (its fields), Failed (status and code), or
// the input ended first (the parser's state and what it left unread).
struct Outcome {
  enum Kind { Done, Failed, Unfinished } kind = Unfinished;
  std::string method, target, path, query;
  int minor_version = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool keep_alive = false, expect_continue = false, chunked = false;
  uint64_t bytes_seen = 0;
  int status = 0;
  std::string code;
  int state = 0;
  std::string unread;

  bool operator==(const Outcome&) const = default;
};

std::string describe(const Outcome& o) {
  std::string s = o.kind == Outcome::Done ? "Done " : o.kind == Outcome::Failed ? "Failed " : "Unfinished ";
  if (o.kind == Outcome::Failed) return s + std::to_string(o.status) + " " + o.code;
  s += printable(o.method) + " " + printable(o.target) + " path=" + printable(o.path) + " query=" + printable(o.query) +
       " minor=" + std::to_string(o.minor_version) + " body=" + std::to_string(o.body.size()) + "B" +
       " keep_alive=" + std::to_string(o.keep_alive) + " expect=" + std::to_string(o.expect_continue) +
       " chunked=" + std::to_string(o.chunked) + " seen=" + std::to_string(o.bytes_seen) +
       " state=" + std::to_string(o.state) + " unread=" + printable(o.unread, 60) + " headers:";
  for (const auto& [k, v] : o.headers) s += " " + printable(k, 40) + "=" + printable(v, 40);
  return s;
}

bool is_tchar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void check_done(const Request& r, const Limits& l) {
  if (r.method.empty()) bad("empty method");
  if (!valid_utf8(r.path)) bad("path is not valid UTF-8:", printable(r.path));
  if (r.path.find('\0') != std::string::npos) bad("path holds a NUL:", printable(r.path));
  if (r.path.empty()) bad("empty path");
  if (r.body.size() > l.max_body_bytes) bad("body over max_body_bytes:", std::to_string(r.body.size()));
  if (r.headers.size() > l.max_headers) bad("more header fields than max_headers");
  if (r.minor_version == 0 && r.keep_alive) bad("HTTP/1.0 request kept alive");
  if (r.expect_continue && r.body.empty() && !r.chunked) bad("expect_continue without a body");
  for (const auto& [name, value] : r.headers) {
    if (name.empty()) bad("empty header name");
    for (char c : name)
      if (!is_tchar(static_cast<unsigned char>(c))) bad("header name is not a lower-case token:", printable(name));
    for (char ch : value) {
      const auto c = static_cast<unsigned char>(ch);
      if ((c < 0x20 && c != '\t') || c == 0x7F) bad("control byte in a header value:", printable(value));
    }
    if (!value.empty() && (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' || value.back() == '\t'))
      bad("header value not trimmed:", printable(value));
    if (!valid_utf8(value)) bad("header value is not UTF-8:", printable(value));
  }
  if (r.chunked && !r.header("transfer-encoding")) bad("chunked without Transfer-Encoding");
}

// Feeds `data` in pieces of the sizes `piece(offset)` gives, resetting after
// each Done request, and returns the outcomes in order.
template <typename PieceSize>
std::vector<Outcome> feed(std::string_view data, PieceSize piece) {
  const Limits l = limits();
  RequestParser parser(l);
  std::string in;
  std::vector<Outcome> out;
  uint64_t last_seen = 0, done_bytes = 0;
  size_t at = 0;
  for (;;) {
    if (at < data.size()) {
      const size_t n = std::min(piece(at), data.size() - at);
      in.append(data.substr(at, n));
      at += n;
    }
    for (;;) {
      const State s = parser.consume(in);
      if (parser.bytes_seen() < last_seen) bad("bytes_seen() went down");
      last_seen = parser.bytes_seen();
      if (s == State::Done || s == State::Failed) {
        const std::string before = in;
        if (parser.consume(in) != s || in != before) bad("Done/Failed consumed more");
      }
      if (s == State::Done) {
        const Request& r = parser.request();
        check_done(r, l);
        Outcome o;
        o.kind = Outcome::Done;
        o.method = r.method, o.target = r.target, o.path = r.path, o.query = r.query;
        o.minor_version = r.minor_version, o.headers = r.headers, o.body = r.body;
        o.keep_alive = r.keep_alive, o.expect_continue = r.expect_continue, o.chunked = r.chunked;
        o.bytes_seen = parser.bytes_seen();
        done_bytes += o.bytes_seen;
        out.push_back(std::move(o));
        parser.reset();
        if (parser.bytes_seen() != 0 || parser.state() != State::Head) bad("reset() left state behind");
        last_seen = 0;
        continue;  // the next pipelined request, from what is left
      }
      if (s == State::Failed) {
        const auto& e = parser.error();
        if (!valid_utf8(e.message)) bad("error message is not valid UTF-8:", printable(e.message));
        if (e.message.empty() || e.code.empty()) bad("error without a message or a code");
        if (e.status != 400 && e.status != 413 && e.status != 415 && e.status != 417 && e.status != 431)
          bad("unexpected status", std::to_string(e.status) + " " + e.code);
        Outcome o;
        o.kind = Outcome::Failed;
        o.status = e.status;
        o.code = e.code;
        out.push_back(std::move(o));
        return out;
      }
      break;  // needs more bytes
    }
    if (at >= data.size()) break;
  }
  // The input ended inside a request (or between two): where it stopped.
  Outcome o;
  o.kind = Outcome::Unfinished;
  o.state = static_cast<int>(parser.state());
  o.bytes_seen = parser.bytes_seen();
  o.body = parser.request().body;
  o.unread = in;
  if (done_bytes + o.bytes_seen + in.size() != data.size()) bad("bytes lost or counted twice");
  out.push_back(std::move(o));
  return out;
}

void compare(const std::vector<Outcome>& a, const std::vector<Outcome>& b, const char* how) {
  if (a == b) return;
  std::fprintf(stderr, "fed whole and fed %s differ (%zu vs %zu outcomes)\n", how, a.size(), b.size());
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    std::fprintf(stderr, "  #%zu whole: %s\n", i, i < a.size() ? describe(a[i]).c_str() : "-");
    std::fprintf(stderr, "  #%zu %s: %s\n", i, how, i < b.size() ? describe(b[i]).c_str() : "-");
  }
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::vector<Outcome> whole = feed(bytes, [&](size_t) { return bytes.size(); });
  compare(whole, feed(bytes, [](size_t) { return size_t{1}; }), "byte by byte");
  // Piece sizes 1..64 cycling through the first (up to) 8 input bytes.
  const size_t k = std::min<size_t>(8, size);
  size_t next = 0;
  compare(whole, feed(bytes, [&](size_t) { return k == 0 ? size_t{1} : size_t{data[next++ % k] % 64u} + 1; }),
          "in pieces");
  return 0;
}
