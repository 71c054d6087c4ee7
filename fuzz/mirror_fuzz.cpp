// libFuzzer target: what a mirror sends (remote/mirror_reply.h): the header
// lines and body of a reply as HttpClient's libcurl callbacks hand them over,
// judged against the request, a HEAD reply's size, and the SHA256SUMS list.
// (The other files a mirror serves go through the parsers the safetensors,
// config, tiktoken and hf_tokenizer targets fuzz.)
//
// The input is text: a first line naming the request,
//   HEAD | GET <max bytes> | RANGE <offset> <n> <total or -> [<If-Match>] | SUMS
// then, but for SUMS, the reply's header lines up to the first empty one and
// the body after it; for SUMS the rest is a SHA256SUMS file. Promises:
//  - the verdict and its message do not depend on how the body was cut into
//    pieces (fed whole, byte by byte, and in pieces sized by its first bytes);
//  - a range reply judged Ok was a 206 whose Content-Range names exactly the
//    asked range (and total), with exactly n body bytes, which are what landed
//    in the destination; nothing is ever written past its n bytes (the buffer
//    has no more; ASan sees a write past it);
//  - a get judged Ok was a 2xx other than 206 whose body, at most max_bytes,
//    is the text kept; any other verdict carries a message;
//  - head_info gives Content-Length's value or throws an Error naming the
//    request;
//  - parse_sha256sums accepts a list of distinct non-empty names with 64
//    lowercase hex digits each, which written back in sha256sum's format
//    parses to the same list, or throws an Error naming the file and line.
// Any other exception, crash or sanitizer report is a bug.
//
// Run with scripts/fuzz.sh; the seed corpus is fuzz/corpus/mirror/, the
// dictionary fuzz/mirror.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "remote/mirror_reply.h"
#include "util/error.h"

namespace {

using deltafin::mirror::BodySink;
using deltafin::mirror::Outcome;
using deltafin::mirror::Reply;
using deltafin::mirror::Request;
using deltafin::mirror::Verdict;

[[noreturn]] void bad(const std::string& what) {
  std::fprintf(stderr, "mirror reply handling breaks its contract: %s\n", what.c_str());
  std::abort();
}

std::string_view take_line(std::string_view& in) {
  const size_t nl = in.find('\n');
  const std::string_view line = in.substr(0, nl == std::string_view::npos ? in.size() : nl + 1);
  in.remove_prefix(line.size());
  return line;
}

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  for (size_t at = 0; at <= line.size();) {
    size_t sp = line.find(' ', at);
    if (sp == std::string_view::npos) sp = line.size();
    if (sp > at) out.push_back(line.substr(at, sp - at));
    at = sp + 1;
  }
  return out;
}

// The request the first line names; nullopt for one HttpClient never sends.
std::optional<Request> parse_request(std::string_view line) {
  const std::vector<std::string_view> w = words(line);
  if (w.empty()) return std::nullopt;
  Request r;
  r.url = "http://mirror/model.safetensors";
  if (w[0] == "HEAD" && w.size() == 1) {
    r.method = "HEAD";
    return r;
  }
  if (w[0] == "GET" && w.size() == 2) {
    const auto max = deltafin::mirror::parse_u64(w[1]);
    if (!max) return std::nullopt;
    r.max_bytes = *max;
    return r;
  }
  if (w[0] == "RANGE" && (w.size() == 4 || w.size() == 5)) {
    const auto offset = deltafin::mirror::parse_u64(w[1]), n = deltafin::mirror::parse_u64(w[2]);
    // get_range sends nothing for n == 0 and refuses a range that overflows.
    if (!offset || !n || *n == 0 || *n - 1 > UINT64_MAX - *offset) return std::nullopt;
    r.ranged = true;
    r.offset = *offset;
    r.n = *n;
    if (w[3] != "-") {
      r.total = deltafin::mirror::parse_u64(w[3]);
      if (!r.total) return std::nullopt;
    }
    if (w.size() == 5) r.if_match = std::string(w[4]);
    return r;
  }
  return std::nullopt;
}

struct Result {
  Outcome outcome;
  std::string text;               // get: the body kept
  std::vector<uint8_t> dest;      // range: the destination buffer
  Reply reply;
};

// One attempt: the header lines, then the body in pieces of piece(offset)
// bytes until accept_body refuses one (curl then stops with a write error,
// which the client judges from the reply, as after a complete transfer).
Result attempt(const Request& r, const std::vector<std::string_view>& head, std::string_view body,
               const std::function<size_t(size_t)>& piece) {
  Result res;
  for (std::string_view line : head) res.reply.header_line(line);
  BodySink sink;
  if (r.ranged) {
    // Exactly what the caller of get_range owns (bounded by what can arrive).
    res.dest.assign(static_cast<size_t>(std::min<uint64_t>(r.n, std::max<size_t>(body.size(), 1))), 0);
    sink.dest = res.dest.data();
  } else {
    sink.text = &res.text;
  }
  for (size_t at = 0; at < body.size();) {
    const size_t n = std::min(piece(at), body.size() - at);
    const size_t took = deltafin::mirror::accept_body(res.reply, r, sink, body.data() + at, n);
    if (took != n) {
      if (took != 0 || res.reply.cut == deltafin::mirror::Cut::None) bad("a refused piece without a reason");
      break;
    }
    at += n;
  }
  res.outcome = deltafin::mirror::judge_reply(r, res.reply);
  return res;
}

void check_ok(const Request& r, const Result& res, std::string_view body) {
  if (res.outcome.verdict != Verdict::Ok) {
    if (res.outcome.failure.empty()) bad("a failed verdict without a message");
    return;
  }
  if (!res.outcome.failure.empty()) bad("an Ok verdict with a failure message");
  if (r.ranged) {
    if (res.reply.status != 206) bad("a range reply accepted with status " + std::to_string(res.reply.status));
    const auto cr = deltafin::mirror::parse_content_range(res.reply.header("content-range"));
    if (!cr || cr->first != r.offset || cr->last != r.last()) bad("a range reply accepted for another range");
    if (r.total && cr->total != r.total) bad("a range reply accepted for another file size");
    if (body.size() != r.n || res.reply.body_bytes != r.n) bad("a range reply accepted with another length");
    if (std::memcmp(res.dest.data(), body.data(), body.size()) != 0) bad("the destination holds other bytes");
    return;
  }
  if (r.method == std::string_view("HEAD")) return;
  if (res.reply.status < 200 || res.reply.status > 299 || res.reply.status == 206) bad("a get accepted with its status");
  if (res.text != body || body.size() > r.max_bytes) bad("a get accepted with another body");
}

void same(const Result& a, const Result& b, const char* how) {
  if (a.outcome.verdict != b.outcome.verdict || a.outcome.failure != b.outcome.failure)
    bad(std::string("fed whole and fed ") + how + " judged differently: \"" + a.outcome.failure + "\" vs \"" +
        b.outcome.failure + "\"");
  if (a.outcome.verdict == Verdict::Ok && (a.dest != b.dest || a.text != b.text))
    bad(std::string("fed whole and fed ") + how + " kept different bytes");
}

void check_head(const Request& r, const Reply& reply) {
  try {
    const deltafin::RemoteFileInfo info = deltafin::mirror::head_info(r, reply);
    if (deltafin::mirror::parse_u64(reply.header("content-length")) != info.bytes) bad("HEAD size is not Content-Length");
    if (info.etag != reply.header("etag")) bad("HEAD ETag");
  } catch (const deltafin::Error& e) {
    if (std::string_view(e.what()).find(r.describe()) == std::string_view::npos)
      bad(std::string("HEAD error does not name the request: ") + e.what());
  }
}

void check_sums(std::string_view text) {
  const std::string file = "fuzz/SHA256SUMS";
  std::vector<std::pair<std::string, std::string>> sums;
  try {
    sums = deltafin::parse_sha256sums(std::string(text), file);
  } catch (const deltafin::Error& e) {
    const std::string_view m = e.what();
    if (m.find(file) == std::string_view::npos || m.find(": line ") == std::string_view::npos)
      bad("SHA256SUMS error does not name the file and line: " + std::string(m));
    return;
  }
  std::set<std::string> names;
  std::string written;
  for (const auto& [name, digest] : sums) {
    if (name.empty() || name.find('\n') != std::string::npos || !names.insert(name).second)
      bad("SHA256SUMS name empty, multi-line or repeated");
    if (digest.size() != 64 || digest.find_first_not_of("0123456789abcdef") != std::string::npos)
      bad("SHA256SUMS digest is not 64 lowercase hex digits");
    written += digest + "  " + name + "\n";
  }
  try {
    if (deltafin::parse_sha256sums(written, file) != sums) bad("SHA256SUMS written back reads differently");
  } catch (const deltafin::Error& e) {
    bad(std::string("SHA256SUMS written back does not parse: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view first = take_line(in);
  if (words(first) == std::vector<std::string_view>{"SUMS"}) {
    check_sums(in);
    return 0;
  }
  const std::optional<Request> r = parse_request(first);
  if (!r) return 0;
  (void)r->describe();
  // Header lines up to and with the empty line that ends them, as curl hands them over.
  std::vector<std::string_view> head;
  for (;;) {
    const std::string_view line = take_line(in);
    if (line.empty()) break;
    head.push_back(line);
    if (line == "\n" || line == "\r\n") break;
  }
  // A HEAD reply has no body (curl reads none).
  const std::string_view body = r->method == std::string_view("HEAD") ? std::string_view() : in;
  const Result whole = attempt(*r, head, body, [&](size_t) { return body.size(); });
  check_ok(*r, whole, body);
  if (r->method == std::string_view("HEAD")) check_head(*r, whole.reply);
  same(whole, attempt(*r, head, body, [](size_t) { return size_t{1}; }), "byte by byte");
  const size_t k = std::min<size_t>(8, body.size());
  size_t next = 0;
  same(whole,
       attempt(*r, head, body,
               [&](size_t) { return k == 0 ? size_t{1} : size_t{static_cast<uint8_t>(body[next++ % k]) % 64u} + 1; }),
       "in pieces");
  return 0;
}
