// The HTTP/1.x request parser (server/http/request_parser.h), byte by byte:
// every request is parsed fed whole and fed one byte at a time, and both must
// give the same Request (or the same Error). Expectations are written out by
// hand: methods, decoded paths, raw queries, lower-cased header names, bodies,
// persistence, and for each refusal its status, machine code and a piece of
// its message (which must itself be valid UTF-8).
#include "server/http/request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace deltafin::http {
namespace {

using State = RequestParser::State;
using Headers = std::vector<std::pair<std::string, std::string>>;

// Small limits, so that every limit is easy to reach.
Limits small() {
  Limits l;
  l.max_head_bytes = 256;
  l.max_headers = 4;
  l.max_body_bytes = 100;
  return l;
}

struct Parsed {
  RequestParser parser;
  std::string rest;  // what the parser left (and, fed bytewise, what was never fed)
  State state() const { return parser.state(); }
  const Request& req() const { return parser.request(); }
  const Error& err() const { return parser.error(); }
};

// `in` fed in one consume() call.
Parsed whole(std::string in, Limits limits = {}) {
  Parsed p{RequestParser(limits), std::move(in)};
  p.parser.consume(p.rest);
  return p;
}

// `in` fed one byte at a time until the parser is Done or Failed. Checks on
// the way that bytes_seen() never decreases.
Parsed bytewise(const std::string& in, Limits limits = {}) {
  Parsed p{RequestParser(limits), ""};
  uint64_t seen = 0;
  size_t fed = 0;
  while (fed < in.size()) {
    p.rest += in[fed++];
    const State s = p.parser.consume(p.rest);
    EXPECT_GE(p.parser.bytes_seen(), seen) << "bytes_seen() went down after byte " << fed;
    seen = p.parser.bytes_seen();
    if (s == State::Done || s == State::Failed) break;
  }
  p.rest += in.substr(fed);
  return p;
}

void expect_same(const Request& a, const Request& b) {
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.query, b.query);
  EXPECT_EQ(a.minor_version, b.minor_version);
  EXPECT_EQ(a.headers, b.headers);
  EXPECT_EQ(a.body, b.body);
  EXPECT_EQ(a.keep_alive, b.keep_alive);
  EXPECT_EQ(a.expect_continue, b.expect_continue);
  EXPECT_EQ(a.chunked, b.chunked);
}

// Parses a complete request both ways; both must be Done with the same
// Request and the same bytes left over. Returns the whole-buffer parse.
Parsed done(const std::string& in, Limits limits = {}) {
  Parsed w = whole(in, limits);
  EXPECT_EQ(w.state(), State::Done) << "fed whole: " << printable(in) << " -> " << w.err().message;
  Parsed b = bytewise(in, limits);
  EXPECT_EQ(b.state(), State::Done) << "fed bytewise: " << printable(in) << " -> " << b.err().message;
  expect_same(w.req(), b.req());
  EXPECT_EQ(w.rest, b.rest);
  EXPECT_EQ(w.parser.bytes_seen(), b.parser.bytes_seen());
  return w;
}

// Parses `in` both ways; both must fail with `status` and `code`, with a
// message that holds `needle` and is valid UTF-8. Returns the whole parse.
Parsed failed(const std::string& in, int status, const std::string& code, const std::string& needle = "",
              Limits limits = {}) {
  SCOPED_TRACE("input: " + printable(in, 400));
  Parsed w = whole(in, limits);
  Parsed b = bytewise(in, limits);
  for (const Parsed* p : {&w, &b}) {
    EXPECT_EQ(p->state(), State::Failed);
    EXPECT_EQ(p->err().status, status) << p->err().message;
    EXPECT_EQ(p->err().code, code) << p->err().message;
    EXPECT_NE(p->err().message.find(needle), std::string::npos) << "'" << needle << "' not in: " << p->err().message;
    EXPECT_TRUE(valid_utf8(p->err().message)) << printable(p->err().message);
  }
  return w;
}

std::string get(const std::string& target, const std::string& fields = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n";
}

std::string post(const std::string& fields, const std::string& body) {
  return "POST /p HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n" + body;
}

std::string chunked_post(const std::string& chunks) { return post("Transfer-Encoding: chunked\r\n", chunks); }

// --- Well-formed requests ---------------------------------------------------

TEST(RequestParser, SimpleGet) {
  const std::string in = "GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
  const Parsed p = done(in);
  const Request& r = p.req();
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/index.html");
  EXPECT_EQ(r.path, "/index.html");
  EXPECT_EQ(r.query, "");
  EXPECT_EQ(r.minor_version, 1);
  EXPECT_EQ(r.headers, (Headers{{"host", "example.com"}, {"accept", "*/*"}}));
  EXPECT_EQ(r.body, "");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_FALSE(r.expect_continue);
  EXPECT_FALSE(r.chunked);
  EXPECT_EQ(p.rest, "");
  EXPECT_EQ(p.parser.bytes_seen(), in.size());
  EXPECT_TRUE(p.parser.started());
  EXPECT_FALSE(p.parser.awaiting_body());
}

TEST(RequestParser, PostWithContentLength) {
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
  const Parsed p = done(head + "hello world");
  EXPECT_EQ(p.req().method, "POST");
  EXPECT_EQ(p.req().path, "/v1/chat/completions");
  EXPECT_EQ(p.req().body, "hello world");
  EXPECT_EQ(p.req().header("content-length"), "11");
  EXPECT_FALSE(p.req().chunked);
  EXPECT_EQ(p.parser.bytes_seen(), head.size() + 11);

  // In two pieces: the head and part of the body, then the rest.
  RequestParser parser;
  std::string in = head + "hello";
  EXPECT_EQ(parser.consume(in), State::Body);
  EXPECT_TRUE(parser.awaiting_body());
  EXPECT_EQ(in, "");
  EXPECT_EQ(parser.request().body, "hello");
  EXPECT_EQ(parser.bytes_seen(), head.size() + 5);
  in += " world!";  // one byte more than the body: it stays
  EXPECT_EQ(parser.consume(in), State::Done);
  EXPECT_EQ(parser.request().body, "hello world");
  EXPECT_EQ(in, "!");
}

TEST(RequestParser, ZeroContentLengthHasNoBody) {
  const Parsed p = done(post("Content-Length: 0\r\n", ""));
  EXPECT_EQ(p.req().body, "");
  EXPECT_EQ(p.parser.state(), State::Done);
}

TEST(RequestParser, ByteAtATimeGivesTheSameRequest) {
  const std::vector<std::string> inputs = {
      "GET /a/b?c=d HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n",
      "POST /x HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcde",
      "PUT /caf%C3%A9 HTTP/1.0\nContent-Length: 3\n\nxyz",
      "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
      "3;e=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\n",
  };
  for (const std::string& in : inputs) {
    SCOPED_TRACE(printable(in));
    const Parsed w = whole(in);
    const Parsed b = bytewise(in);
    ASSERT_EQ(w.state(), State::Done) << w.err().message;
    ASSERT_EQ(b.state(), State::Done) << b.err().message;
    expect_same(w.req(), b.req());
    EXPECT_EQ(b.rest, "");
    EXPECT_EQ(b.parser.bytes_seen(), in.size());
  }
  // And spot checks of what they parse to.
  EXPECT_EQ(whole(inputs[2]).req().path, "/caf\xC3\xA9");
  EXPECT_EQ(whole(inputs[3]).req().body, "abc0123456789abcdef");
}

TEST(RequestParser, PipelinedRequests) {
  const std::string first = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz";
  const std::string second = "GET /b?x=1 HTTP/1.1\r\nHost: h\r\n\r\n";
  std::string in = first + second;
  RequestParser parser;
  EXPECT_EQ(parser.consume(in), State::Done);
  EXPECT_EQ(parser.request().path, "/a");
  EXPECT_EQ(parser.request().body, "xyz");
  EXPECT_EQ(in, second);  // the second request is left for later
  EXPECT_EQ(parser.bytes_seen(), first.size());
  EXPECT_EQ(parser.consume(in), State::Done);  // Done consumes nothing more
  EXPECT_EQ(in, second);

  const Request a = parser.take_request();
  EXPECT_EQ(a.path, "/a");
  parser.reset();
  EXPECT_EQ(parser.state(), State::Head);
  EXPECT_EQ(parser.bytes_seen(), 0u);
  EXPECT_FALSE(parser.started());
  EXPECT_EQ(parser.consume(in), State::Done);
  EXPECT_EQ(parser.request().method, "GET");
  EXPECT_EQ(parser.request().path, "/b");
  EXPECT_EQ(parser.request().query, "x=1");
  EXPECT_EQ(parser.request().body, "");
  EXPECT_EQ(in, "");
  EXPECT_EQ(parser.bytes_seen(), second.size());

  // The same two requests fed byte by byte, resetting after the first.
  RequestParser p2;
  std::string buf;
  std::vector<Request> got;
  for (char c : first + second) {
    buf += c;
    if (p2.consume(buf) == State::Done) {
      got.push_back(p2.take_request());
      p2.reset();
    }
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].body, "xyz");
  EXPECT_EQ(got[1].path, "/b");
  EXPECT_EQ(buf, "");
}

TEST(RequestParser, LeadingBlankLinesAreSkipped) {
  const std::string req = "GET / HTTP/1.1\r\n\r\n";
  Parsed p = done("\r\n\r\n" + req);
  EXPECT_EQ(p.req().path, "/");
  EXPECT_EQ(p.parser.bytes_seen(), 4 + req.size());
  p = done("\n\n\n" + req);
  EXPECT_EQ(p.req().method, "GET");

  // A CRLF after a POST body (some clients send one) before the next request.
  std::string in = "POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nx\r\n" + req;
  RequestParser parser;
  ASSERT_EQ(parser.consume(in), State::Done);
  parser.reset();
  ASSERT_EQ(parser.consume(in), State::Done);
  EXPECT_EQ(parser.request().path, "/");
  EXPECT_EQ(in, "");

  // Blank lines alone are counted against the head limit.
  failed(std::string(300, '\n') + req, 431, "header_too_large", "blank lines", small());
  // Only blank lines so far: nothing to answer yet, but they were seen.
  RequestParser idle;
  std::string blanks = "\r\n\r\n";
  EXPECT_EQ(idle.consume(blanks), State::Head);
  EXPECT_EQ(blanks, "");
  EXPECT_EQ(idle.bytes_seen(), 4u);
}

TEST(RequestParser, LfOnlyLineEnds) {
  Parsed p = done("GET /x HTTP/1.1\nHost: a\nX-Y:  z \n\n");
  EXPECT_EQ(p.req().path, "/x");
  EXPECT_EQ(p.req().headers, (Headers{{"host", "a"}, {"x-y", "z"}}));
  // Mixed: LF-only header lines, CRLF blank line.
  p = done("GET /m HTTP/1.1\nA: b\r\nC: d\n\r\n");
  EXPECT_EQ(p.req().headers, (Headers{{"a", "b"}, {"c", "d"}}));
  // LF-only chunked framing.
  p = done("POST /c HTTP/1.1\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n");
  EXPECT_EQ(p.req().body, "abc");
}

TEST(RequestParser, Persistence) {
  Parsed p = done("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(p.req().minor_version, 0);
  EXPECT_FALSE(p.req().keep_alive);
  p = done("GET / HTTP/1.0\r\n\r\n");
  EXPECT_FALSE(p.req().keep_alive);
  p = done("GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(p.req().minor_version, 1);
  EXPECT_FALSE(p.req().keep_alive);
  p = done("GET / HTTP/1.1\r\nConnection: Keep-Alive, CLOSE\r\n\r\n");
  EXPECT_FALSE(p.req().keep_alive);
  p = done("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_TRUE(p.req().keep_alive);
  p = done("GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n");
  EXPECT_TRUE(p.req().keep_alive);
}

TEST(RequestParser, AbsoluteFormTarget) {
  Parsed p = done("GET http://example.com:8080/a/b?x=1&y HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_EQ(p.req().target, "http://example.com:8080/a/b?x=1&y");
  EXPECT_EQ(p.req().path, "/a/b");
  EXPECT_EQ(p.req().query, "x=1&y");
  p = done("GET HTTPS://Example.com HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.req().path, "/");
  EXPECT_EQ(p.req().query, "");
  p = done("GET http://h/caf%C3%A9 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.req().path, "/caf\xC3\xA9");
  // The authority ends at '?' as well as at '/'.
  p = done("GET http://h?q=1 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.req().path, "/");
  EXPECT_EQ(p.req().query, "q=1");
  p = done("GET http://h?a=/b HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.req().path, "/");
  EXPECT_EQ(p.req().query, "a=/b");
  failed("GET http://h/%zz HTTP/1.1\r\n\r\n", 400, "invalid_path", "'/%zz'");
}

TEST(RequestParser, AsteriskFormIsForOptionsOnly) {
  Parsed p = done("OPTIONS * HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.req().target, "*");
  EXPECT_EQ(p.req().path, "*");
  failed("GET * HTTP/1.1\r\n\r\n", 400, "invalid_path", "OPTIONS");
  failed("GET index.html HTTP/1.1\r\n\r\n", 400, "invalid_path", "'index.html'");
}

TEST(RequestParser, QueryIsSplitOffAndNotDecoded) {
  Parsed p = done(get("/search?q=a%20b&x=%zz&n=%00"));
  EXPECT_EQ(p.req().path, "/search");
  EXPECT_EQ(p.req().query, "q=a%20b&x=%zz&n=%00");
  EXPECT_EQ(p.req().target, "/search?q=a%20b&x=%zz&n=%00");
  p = done(get("/p?"));
  EXPECT_EQ(p.req().path, "/p");
  EXPECT_EQ(p.req().query, "");
  p = done(get("/p?a?b=/c"));
  EXPECT_EQ(p.req().path, "/p");
  EXPECT_EQ(p.req().query, "a?b=/c");
  p = done(get("/a%3Fb?c"));  // an encoded '?' is part of the path
  EXPECT_EQ(p.req().path, "/a?b");
  EXPECT_EQ(p.req().query, "c");
}

TEST(RequestParser, PathIsPercentDecoded) {
  EXPECT_EQ(done(get("/a%2Fb")).req().path, "/a/b");
  EXPECT_EQ(done(get("/a%2fb")).req().path, "/a/b");
  EXPECT_EQ(done(get("/caf%C3%A9")).req().path, "/caf\xC3\xA9");
  EXPECT_EQ(done(get("/caf%c3%a9")).req().path, "/caf\xC3\xA9");
  EXPECT_EQ(done(get("/%E2%82%AC")).req().path, "/\xE2\x82\xAC");
  EXPECT_EQ(done(get("/%F0%9F%98%80x")).req().path, "/\xF0\x9F\x98\x80x");
  EXPECT_EQ(done(get("/a%20b%25")).req().path, "/a b%");
  EXPECT_EQ(done(get("/v1/files/file-abc")).req().path, "/v1/files/file-abc");
  EXPECT_EQ(done(get("/%C3%A9")).req().target, "/%C3%A9");  // target stays as sent
}

// A bad path: 400 invalid_path, naming the path.
void bad_path(const std::string& target, const std::string& needle) {
  SCOPED_TRACE(target);
  const size_t q = target.find('?');
  failed(get(target), 400, "invalid_path", "'" + printable(target.substr(0, q)) + "'");
  failed(get(target), 400, "invalid_path", needle);
}

TEST(RequestParser, InvalidPercentEscapes) {
  bad_path("/a%zz", "invalid percent-escape at byte 2");
  bad_path("/a%4", "invalid percent-escape");
  bad_path("/a%", "invalid percent-escape");
  bad_path("/%g0", "invalid percent-escape");
  bad_path("/%0g?x=1", "invalid percent-escape");
}

TEST(RequestParser, DecodedNulIsRefused) { bad_path("/a%00b", "NUL"); }

TEST(RequestParser, DecodedInvalidUtf8IsRefused) {
  bad_path("/%ff", "not valid UTF-8");
  bad_path("/%C0%AF", "not valid UTF-8");      // overlong '/'
  bad_path("/%E0%80%AF", "not valid UTF-8");   // overlong, 3 bytes
  bad_path("/%ED%A0%80", "not valid UTF-8");   // surrogate U+D800
  bad_path("/%F4%90%80%80", "not valid UTF-8");  // above U+10FFFF
  bad_path("/%C3", "not valid UTF-8");         // truncated sequence
  bad_path("/%80", "not valid UTF-8");         // lone continuation byte
}

TEST(RequestParser, RawBytesInTheTargetAreRefused) {
  for (const std::string& target :
       {std::string("/caf\xC3\xA9"), std::string("/\xff"), std::string("/a\x01"), std::string("/a\tb"),
        std::string("/a\x7f"), std::string("/x?q=\x80")}) {
    SCOPED_TRACE(printable(target));
    const Parsed p = failed(get(target), 400, "invalid_path", "'" + printable(target) + "'");
    EXPECT_NE(p.err().message.find("percent-encoded"), std::string::npos);
  }
  // The message escapes the raw bytes, so it stays valid UTF-8.
  const Parsed p = failed(get("/caf\xC3\xA9"), 400, "invalid_path", "/caf\\xc3\\xa9");
  EXPECT_EQ(p.err().message.find('\xC3'), std::string::npos);
  // A space cannot be told from the request line's separators: the line is malformed.
  failed(get("/a b"), 400, "bad_request", "Malformed request line");
}

TEST(RequestParser, MalformedRequestLines) {
  failed("GET /\r\n\r\n", 400, "bad_request", "Malformed request line 'GET /'");
  failed("GET\r\n\r\n", 400, "bad_request", "Malformed request line");
  failed("GET / HTTP/2.0\r\n\r\n", 400, "bad_request", "Unsupported protocol 'HTTP/2.0'");
  failed("GET / HTTP/1.10\r\n\r\n", 400, "bad_request", "Unsupported protocol");
  failed("GET / HTTP/1.x\r\n\r\n", 400, "bad_request", "Unsupported protocol");
  failed("GET / http/1.1\r\n\r\n", 400, "bad_request", "Unsupported protocol");
  failed("GET / HTTP/1.1 \r\n\r\n", 400, "bad_request", "Malformed request line");
  failed("GET  / HTTP/1.1\r\n\r\n", 400, "bad_request", "Malformed request line");
  failed("GET /  HTTP/1.1\r\n\r\n", 400, "bad_request", "Malformed request line");
  failed(" GET / HTTP/1.1\r\n\r\n", 400, "bad_request", "Malformed request line");  // three spaces
  failed(" / HTTP/1.1\r\n\r\n", 400, "bad_request", "Malformed method");  // an empty method
  failed("G(T / HTTP/1.1\r\n\r\n", 400, "bad_request", "Malformed method");
  failed("GE\x01T / HTTP/1.1\r\n\r\n", 400, "bad_request", "GE\\x01T");
  failed("G\xC3\xA9T / HTTP/1.1\r\n\r\n", 400, "bad_request", "Malformed method");
  failed("GET\t/ HTTP/1.1\r\n\r\n", 400, "bad_request", "Malformed request line");
  // Any token is a method; the handlers decide which they serve.
  EXPECT_EQ(done("PATCH / HTTP/1.1\r\n\r\n").req().method, "PATCH");
  EXPECT_EQ(done("get / HTTP/1.1\r\n\r\n").req().method, "get");
}

TEST(RequestParser, HeaderFields) {
  const Parsed p = done(get("/", "Content-TYPE:application/json\r\nX-Empty:\r\nX-Pad: \t a \t b \t\r\nX-Dup: 1\r\n"
                                 "X-Dup: 2\r\n"));
  EXPECT_EQ(p.req().headers, (Headers{{"host", "h"},
                                      {"content-type", "application/json"},
                                      {"x-empty", ""},
                                      {"x-pad", "a \t b"},
                                      {"x-dup", "1"},
                                      {"x-dup", "2"}}));
  EXPECT_EQ(p.req().header("content-type"), "application/json");
  EXPECT_EQ(p.req().header("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(p.req().header("Content-Type"), "application/json");
  EXPECT_EQ(p.req().header("x-dup"), "1");  // the first
  EXPECT_EQ(p.req().header("x-empty"), "");
  EXPECT_EQ(p.req().header("x-missing"), std::nullopt);
  EXPECT_EQ(p.req().header(""), std::nullopt);
}

// UTF-8 in a value is kept as it is; bytes that are not UTF-8 are a 400
// naming the header (a handler may quote any value in a JSON message).
TEST(RequestParser, Utf8InValuesIsKeptAndOtherHighBytesRefused) {
  const Parsed p = done(get("/", "X-Name: caf\xC3\xA9 \xE2\x82\xAC!\r\n"));
  EXPECT_EQ(p.req().header("x-name"), "caf\xC3\xA9 \xE2\x82\xAC!");
  failed(get("/", "X-Name: caf\xC3\xA9 \xff\x80!\r\n"), 400, "bad_header", "header 'x-name' is not valid UTF-8");
  failed(get("/", "Content-Type: application/\xff\xfe\r\n"), 400, "bad_header", "'content-type'");
}

TEST(RequestParser, MalformedHeaderLines) {
  failed(get("/", "A: b\r\n  c\r\n"), 400, "bad_header", "continuation");
  failed(get("/", "A: b\r\n\tc\r\n"), 400, "bad_header", "continuation");
  failed("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400, "bad_header", "continuation");
  failed(get("/", "Host example.com\r\n"), 400, "bad_header", "'Host example.com'");
  failed(get("/", "Host : x\r\n"), 400, "bad_header", "Malformed header line 2");
  failed(get("/", "Ho st: x\r\n"), 400, "bad_header", "Malformed header line");
  failed(get("/", ": x\r\n"), 400, "bad_header", "Malformed header line");
  failed(get("/", "X(y): x\r\n"), 400, "bad_header", "Malformed header line");
  failed(get("/", "X-\xC3\xA9: x\r\n"), 400, "bad_header", "X-\\xc3\\xa9");
  failed(get("/", "X-Ctl: a\x01z\r\n"), 400, "bad_header", "header 'x-ctl'");
  failed(get("/", "X-Ctl: a\x7fz\r\n"), 400, "bad_header", "control byte");
  failed(get("/", std::string("X-Ctl: a\0z\r\n", 12)), 400, "bad_header", "control byte");
  failed(get("/", "X-Cr: a\rz\r\n"), 400, "bad_header", "control byte");
}

// --- Limits -----------------------------------------------------------------

TEST(RequestParser, HeadSizeLimit) {
  // "GET / HTTP/1.1\r\n" + "X: " + pad + "\r\n\r\n" is 23 + pad bytes.
  const auto head = [](size_t pad) { return "GET / HTTP/1.1\r\nX: " + std::string(pad, 'a') + "\r\n\r\n"; };
  ASSERT_EQ(head(233).size(), 256u);
  EXPECT_EQ(done(head(233), small()).req().header("x")->size(), 233u);
  failed(head(234), 431, "header_too_large", "256 bytes", small());
  // LF-only ends count as the bytes they are.
  EXPECT_EQ(done("GET / HTTP/1.1\nX: " + std::string(236, 'a') + "\n\n", small()).req().method, "GET");
}

TEST(RequestParser, HeadThatNeverEndsIsRefusedAtTheLimit) {
  // One endless header line, fed byte by byte: refused once byte 257 comes.
  const std::string start = "GET / HTTP/1.1\r\nX: ";
  RequestParser parser(small());
  std::string in;
  size_t fed = 0;
  for (; fed < 1000 && parser.state() == State::Head; ++fed) {
    in += fed < start.size() ? start[fed] : 'a';
    parser.consume(in);
  }
  EXPECT_EQ(parser.state(), State::Failed);
  EXPECT_EQ(fed, 257u);
  EXPECT_EQ(parser.error().status, 431);
  EXPECT_EQ(parser.error().code, "header_too_large");
  // Fed whole, without a blank line: the same.
  failed(start + std::string(300, 'a'), 431, "header_too_large", "", small());
  // Many short complete lines, no blank line, under the field limit but over the bytes.
  Limits many = small();
  many.max_headers = 1000;
  std::string lines = "GET / HTTP/1.1\r\n";
  while (lines.size() <= 300) lines += "A: b\r\n";
  failed(lines, 431, "header_too_large", "", many);
}

TEST(RequestParser, HeaderCountLimit) {
  const std::string four = "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n";
  EXPECT_EQ(done("GET / HTTP/1.1\r\n" + four + "\r\n", small()).req().headers.size(), 4u);
  failed("GET / HTTP/1.1\r\n" + four + "E: 5\r\n\r\n", 431, "too_many_headers", "4", small());

  // Before the blank line comes: four fields are fine so far, a fifth is refused.
  RequestParser parser(small());
  std::string in = "GET / HTTP/1.1\r\n" + four;
  EXPECT_EQ(parser.consume(in), State::Head);
  in += "E: 5\r\n";
  EXPECT_EQ(parser.consume(in), State::Failed);
  EXPECT_EQ(parser.error().status, 431);
  EXPECT_EQ(parser.error().code, "too_many_headers");
  failed("GET / HTTP/1.1\r\n" + four + "E: 5\r\n", 431, "too_many_headers", "", small());
}

TEST(RequestParser, HeaderLimitCodeDoesNotDependOnSegmentation) {
  // Too many fields early on and too many bytes later: whichever comes first
  // in the byte stream decides, however the bytes arrive.
  Limits l = small();
  const std::string fields = "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n", big = "F: " + std::string(300, 'x') + "\r\n";
  failed("GET / HTTP/1.1\r\n" + fields + big + "\r\n", 431, "too_many_headers", "", l);
  failed("GET / HTTP/1.1\r\n" + big + fields + "\r\n", 431, "header_too_large", "", l);
  failed("GET / HTTP/1.1\r\n" + big + fields, 431, "header_too_large", "", l);
}

TEST(RequestParser, ContentLengthOverTheLimitIsRefusedAtTheHead) {
  // The head alone, no body byte sent: refused already.
  Parsed p = failed(post("Content-Length: 101\r\n", ""), 413, "request_too_large", "101 bytes", small());
  EXPECT_EQ(p.rest, "");
  p = failed(post("Content-Length: 999999999999999999\r\n", ""), 413, "request_too_large", "", small());
  failed(post("Content-Length: 1000000000000000000\r\n", ""), 400, "bad_header", "not a byte count", small());

  // At the limit: fine.
  RequestParser parser(small());
  std::string in = post("Content-Length: 100\r\n", "");
  EXPECT_EQ(parser.consume(in), State::Body);
  in = std::string(100, 'b');
  EXPECT_EQ(parser.consume(in), State::Done);
  EXPECT_EQ(parser.request().body, std::string(100, 'b'));
}

// --- Chunked bodies ---------------------------------------------------------

TEST(RequestParser, ChunkedBody) {
  const std::string chunks =
      "4;name=val\r\nWiki\r\n5\r\npedia\r\nE ; a=\"b\"\r\n in\r\n\r\nchunks.\r\n0004\r\nabcd\r\na\r\n0123456789\r\n"
      "0;last\r\nX-Trailer: yes\r\nOther: 1\r\n\r\n";
  const std::string next = "GET /next HTTP/1.1\r\n\r\n";
  const Parsed p = done(chunked_post(chunks) + next);
  EXPECT_TRUE(p.req().chunked);
  EXPECT_EQ(p.req().body, "Wikipedia in\r\n\r\nchunks.abcd0123456789");
  EXPECT_EQ(p.req().header("transfer-encoding"), "chunked");
  EXPECT_EQ(p.req().header("x-trailer"), std::nullopt);  // trailers are read and dropped
  EXPECT_EQ(p.rest, next);
  EXPECT_EQ(p.parser.bytes_seen(), chunked_post(chunks).size());

  // No data at all, and an upper-case coding name.
  const Parsed e = done(post("Transfer-Encoding: Chunked\r\n", "0\r\n\r\n"));
  EXPECT_TRUE(e.req().chunked);
  EXPECT_EQ(e.req().body, "");
}

TEST(RequestParser, ChunkedBodyOverTheLimitIsRefusedAtTheSizeLine) {
  const std::string fifty(50, 'x'), fiftyone(51, 'y');
  // 50 + 51 > 100: refused at "33", before any of its bytes is kept.
  Parsed p = failed(chunked_post("32\r\n" + fifty + "\r\n33\r\n" + fiftyone + "\r\n0\r\n\r\n"), 413,
                    "request_too_large", "100 bytes", small());
  EXPECT_EQ(p.req().body, fifty);
  EXPECT_EQ(p.rest, fiftyone + "\r\n0\r\n\r\n");
  // The size line alone is enough.
  p = failed(chunked_post("32\r\n" + fifty + "\r\n33\r\n"), 413, "request_too_large", "", small());
  EXPECT_EQ(p.req().body, fifty);
  // A huge declared chunk: refused without waiting for it.
  failed(chunked_post("fffffffffffffff\r\n"), 413, "request_too_large", "", small());
  // Exactly the limit: fine.
  EXPECT_EQ(done(chunked_post("32\r\n" + fifty + "\r\n32\r\n" + fifty + "\r\n0\r\n\r\n"), small()).req().body.size(),
            100u);
}

TEST(RequestParser, MalformedChunks) {
  failed(chunked_post("zz\r\nab\r\n0\r\n\r\n"), 400, "bad_chunk", "malformed chunk size 'zz'");
  failed(chunked_post("\r\n"), 400, "bad_chunk", "malformed chunk size");
  failed(chunked_post(";ext\r\n"), 400, "bad_chunk", "malformed chunk size");
  failed(chunked_post("-1\r\n"), 400, "bad_chunk", "malformed chunk size");
  failed(chunked_post("0x5\r\n"), 400, "bad_chunk", "malformed chunk size");
  failed(chunked_post("5 5\r\n"), 400, "bad_chunk", "malformed chunk size");
  failed(chunked_post("0000000000000001\r\n"), 400, "bad_chunk", "malformed chunk size");  // 16 digits
  failed(chunked_post("ffffffffffffffffffff\r\n"), 400, "bad_chunk", "malformed chunk size");
  // Data longer than the size.
  failed(chunked_post("3\r\nabcd\r\n0\r\n\r\n"), 400, "bad_chunk", "");
  failed(chunked_post("3\r\nabcdefgh\r\n0\r\n\r\n"), 400, "bad_chunk", "");
  failed(chunked_post("3\r\nabc"
                      "d\n0\r\n\r\n"),
         400, "bad_chunk", "longer than its declared size");
  // A chunk-size line that never ends.
  failed(chunked_post(std::string(5000, '1')), 400, "bad_chunk", "chunk-size line is too long");
  failed(chunked_post("1;" + std::string(5000, 'e')), 400, "bad_chunk", "chunk-size line is too long");
  // A bad trailer line.
  failed(chunked_post("0\r\nno colon here\r\n\r\n"), 400, "bad_chunk", "malformed trailer line 'no colon here'");
}

TEST(RequestParser, TrailerBlockOverTheHeadLimits) {
  // More trailer fields than max_headers.
  failed(chunked_post("0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n"), 431, "header_too_large", "trailer", small());
  EXPECT_EQ(done(chunked_post("0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n"), small()).req().body, "");
  // More trailer bytes than max_head_bytes, in a few lines.
  const std::string line = "T: " + std::string(95, 't') + "\r\n";  // 100 bytes
  failed(chunked_post("0\r\n" + line + line + line + "\r\n"), 431, "header_too_large", "trailer", small());
  // In one long line, ended and never ended.
  failed(chunked_post("0\r\nT: " + std::string(300, 't') + "\r\n\r\n"), 431, "header_too_large", "trailer", small());
  failed(chunked_post("0\r\nT: " + std::string(300, 't')), 431, "header_too_large", "trailer", small());
}

// --- Framing, codings, expectations -----------------------------------------

TEST(RequestParser, AmbiguousFramingIsRefused) {
  failed(post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400, "bad_request",
         "both Content-Length and Transfer-Encoding");
  failed(post("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n"), 400, "bad_request", "both");
  failed(post("Content-Length: 5\r\nContent-Length: 6\r\n", "abcdef"), 400, "bad_header", "different values");
  failed(post("Content-Length: 5, 6\r\n", "abcdef"), 400, "bad_header", "different values");
  failed(post("Content-Length: abc\r\n", ""), 400, "bad_header", "not a byte count: 'abc'");
  failed(post("Content-Length: -1\r\n", ""), 400, "bad_header", "not a byte count");
  failed(post("Content-Length: +5\r\n", "abcde"), 400, "bad_header", "not a byte count");
  failed(post("Content-Length: 0x5\r\n", "abcde"), 400, "bad_header", "not a byte count");
  failed(post("Content-Length:\r\n", ""), 400, "bad_header", "empty");

  // Repeats of the same length are one length.
  EXPECT_EQ(done(post("Content-Length: 5, 5\r\n", "abcde")).req().body, "abcde");
  EXPECT_EQ(done(post("Content-Length: 5\r\nContent-Length: 5\r\n", "abcde")).req().body, "abcde");
}

TEST(RequestParser, TransferEncodings) {
  failed(post("Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n"), 400, "unsupported_encoding", "exactly 'chunked'");
  failed(post("Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n"), 400, "unsupported_encoding", "");
  failed(post("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400, "unsupported_encoding",
         "");
  failed(post("Transfer-Encoding: identity\r\n", ""), 400, "unsupported_encoding", "");
  failed(post("Transfer-Encoding:\r\n", ""), 400, "unsupported_encoding", "");
  failed("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "bad_request", "HTTP/1.0");
}

TEST(RequestParser, ContentEncodings) {
  failed(post("Content-Encoding: gzip\r\nContent-Length: 3\r\n", "abc"), 415, "unsupported_encoding", "'gzip'");
  failed(post("Content-Encoding: identity, br\r\nContent-Length: 3\r\n", "abc"), 415, "unsupported_encoding", "");
  EXPECT_EQ(done(post("Content-Encoding: identity\r\nContent-Length: 3\r\n", "abc")).req().body, "abc");
  EXPECT_EQ(done(post("Content-Encoding: IDENTITY\r\nContent-Length: 3\r\n", "abc")).req().body, "abc");
}

TEST(RequestParser, ExpectContinue) {
  const std::string head = post("Expect: 100-continue\r\nContent-Length: 5\r\n", "");
  RequestParser parser;
  std::string in = head;
  EXPECT_EQ(parser.consume(in), State::Body);
  EXPECT_TRUE(parser.awaiting_body());
  EXPECT_TRUE(parser.request().expect_continue);
  EXPECT_EQ(parser.request().body, "");
  EXPECT_EQ(parser.bytes_seen(), head.size());
  in = "hello";
  EXPECT_EQ(parser.consume(in), State::Done);
  EXPECT_FALSE(parser.awaiting_body());
  EXPECT_TRUE(parser.request().expect_continue);
  EXPECT_EQ(parser.request().body, "hello");

  EXPECT_TRUE(done(post("Expect: 100-Continue\r\nTransfer-Encoding: chunked\r\n", "1\r\na\r\n0\r\n\r\n"))
                  .req()
                  .expect_continue);
  // No body to wait for, or HTTP/1.0 (which has no 100 Continue): nothing to send.
  EXPECT_FALSE(done(get("/", "Expect: 100-continue\r\n")).req().expect_continue);
  EXPECT_FALSE(done("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx").req().expect_continue);

  failed(get("/", "Expect: something-else\r\n"), 417, "expectation_failed", "something-else");
  failed(post("Expect: 200-ok\r\nContent-Length: 1\r\n", "x"), 417, "expectation_failed", "");
}

// --- The parser's state -----------------------------------------------------

TEST(RequestParser, BytesSeen) {
  RequestParser parser;
  EXPECT_EQ(parser.bytes_seen(), 0u);
  EXPECT_FALSE(parser.started());
  std::string in;
  EXPECT_EQ(parser.consume(in), State::Head);
  EXPECT_FALSE(parser.started());

  // A head still arriving stays in `in` and is not counted until it is complete.
  in = "GET / HT";
  EXPECT_EQ(parser.consume(in), State::Head);
  EXPECT_EQ(in, "GET / HT");
  EXPECT_EQ(parser.bytes_seen(), 0u);
  in += "TP/1.1\r\nContent-Length: 4\r\n\r\nab";
  const size_t head = std::string("GET / HTTP/1.1\r\nContent-Length: 4\r\n\r\n").size();
  EXPECT_EQ(parser.consume(in), State::Body);
  EXPECT_EQ(parser.bytes_seen(), head + 2);
  in = "cdEXTRA";
  EXPECT_EQ(parser.consume(in), State::Done);
  EXPECT_EQ(parser.bytes_seen(), head + 4);
  EXPECT_EQ(in, "EXTRA");
  parser.reset();
  EXPECT_EQ(parser.bytes_seen(), 0u);

  // Byte by byte over a chunked request: never decreasing, the bytes fed
  // less those still waiting in `in`, and all of them at the end.
  const std::string req = chunked_post("3;x\r\nabc\r\n0\r\nT: 1\r\n\r\n");
  RequestParser p2;
  std::string buf;
  uint64_t last = 0;
  size_t fed = 0;
  for (char c : req) {
    buf += c;
    ++fed;
    p2.consume(buf);
    EXPECT_GE(p2.bytes_seen(), last);
    EXPECT_EQ(p2.bytes_seen() + buf.size(), fed);
    last = p2.bytes_seen();
  }
  EXPECT_EQ(p2.state(), State::Done);
  EXPECT_EQ(p2.bytes_seen(), req.size());
}

TEST(RequestParser, FailedConsumesNothingMore) {
  RequestParser parser;
  std::string in = "BAD\r\n\r\nGET / HTTP/1.1\r\n\r\n";
  EXPECT_EQ(parser.consume(in), State::Failed);
  const std::string left = in;
  EXPECT_EQ(parser.consume(in), State::Failed);
  EXPECT_EQ(in, left);
  EXPECT_EQ(parser.error().code, "bad_request");
  parser.reset();
  EXPECT_EQ(parser.error().code, "");
  EXPECT_EQ(parser.consume(in), State::Done);
  EXPECT_EQ(parser.request().path, "/");
}

TEST(RequestParser, TakeRequestMovesItOut) {
  RequestParser parser;
  std::string in = post("Content-Length: 3\r\n", "abc");
  ASSERT_EQ(parser.consume(in), State::Done);
  const Request r = parser.take_request();
  EXPECT_EQ(r.body, "abc");
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.header("host"), "h");
}

// --- Helpers ------------------------------------------------------------------

TEST(RequestParserHelpers, ValidUtf8) {
  for (const std::string& s : {std::string(""), std::string("abc"), std::string("a\0b", 3), std::string("caf\xC3\xA9"),
                               std::string("\xC2\x80"), std::string("\xDF\xBF"), std::string("\xE0\xA0\x80"),
                               std::string("\xE2\x82\xAC"), std::string("\xED\x9F\xBF"), std::string("\xEE\x80\x80"),
                               std::string("\xEF\xBF\xBF"), std::string("\xF0\x90\x80\x80"),
                               std::string("\xF0\x9F\x98\x80"), std::string("\xF4\x8F\xBF\xBF")})
    EXPECT_TRUE(valid_utf8(s)) << printable(s);
  for (const std::string& s :
       {std::string("\xff"), std::string("\xfe"), std::string("\x80"), std::string("a\xBF"), std::string("\xC0\xAF"),
        std::string("\xC1\xBF"), std::string("\xE0\x80\xAF"), std::string("\xE0\x9F\xBF"), std::string("\xF0\x80\x80\xAF"),
        std::string("\xF0\x8F\xBF\xBF"), std::string("\xED\xA0\x80"), std::string("\xED\xBF\xBF"),
        std::string("\xF4\x90\x80\x80"), std::string("\xF5\x80\x80\x80"), std::string("\xF8\x88\x80\x80\x80"),
        std::string("\xC3"), std::string("a\xC3"), std::string("\xE2\x82"), std::string("\xF0\x9F\x98"),
        std::string("\xC3\x28"), std::string("\xE2\x28\xAC"), std::string("\xE2\x82\x28"), std::string("\xC3\xC3\xA9")})
    EXPECT_FALSE(valid_utf8(s)) << printable(s);
}

TEST(RequestParserHelpers, Printable) {
  EXPECT_EQ(printable("abc XYZ ~!"), "abc XYZ ~!");
  EXPECT_EQ(printable(""), "");
  EXPECT_EQ(printable("a\\b"), "a\\x5cb");
  EXPECT_EQ(printable("tab\there\r\n"), "tab\\x09here\\x0d\\x0a");
  EXPECT_EQ(printable(std::string("\x00\x01\x1f\x7f\x80\xff", 6)), "\\x00\\x01\\x1f\\x7f\\x80\\xff");
  EXPECT_EQ(printable("caf\xC3\xA9"), "caf\\xc3\\xa9");
  // Clipped at `max` bytes of output.
  EXPECT_EQ(printable("abcd", 4), "abcd");
  EXPECT_EQ(printable("abcde", 4), "abcd...");
  EXPECT_EQ(printable("\x01\x02", 4), "\\x01...");
  EXPECT_EQ(printable(std::string(300, 'a')), std::string(200, 'a') + "...");
  EXPECT_TRUE(valid_utf8(printable("\xff\xfe\xC3")));
}

TEST(RequestParserHelpers, DecodePath) {
  std::string why;
  EXPECT_EQ(decode_path("/a%2Fb%41", why), "/a/bA");
  EXPECT_EQ(decode_path("", why), "");
  EXPECT_EQ(decode_path("%", why), std::nullopt);
  EXPECT_NE(why.find("byte 0"), std::string::npos) << why;
  EXPECT_EQ(decode_path("/x%00", why), std::nullopt);
  EXPECT_NE(why.find("NUL byte at byte 2"), std::string::npos) << why;
  EXPECT_EQ(decode_path("/%ED%A0%80", why), std::nullopt);
  EXPECT_NE(why.find("UTF-8"), std::string::npos) << why;
}

}  // namespace
}  // namespace deltafin::http
