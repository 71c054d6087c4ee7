#include "remote/mirror_reply.h"

#include <cctype>
#include <cstring>
#include <limits>

#include "util/error.h"

namespace deltafin {
namespace mirror {
namespace {

bool is_2xx(long status) { return status >= 200 && status < 300; }

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

Outcome retry(std::string why) { return {Verdict::Retry, std::move(why)}; }
Outcome fatal(std::string why) { return {Verdict::Fatal, std::move(why)}; }

}  // namespace

std::optional<uint64_t> parse_u64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<ContentRange> parse_content_range(std::string_view v) {
  if (lowercase(v.substr(0, 6)) != "bytes ") return std::nullopt;
  v.remove_prefix(6);
  const size_t slash = v.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  ContentRange r;
  const std::string_view span = v.substr(0, slash), total = v.substr(slash + 1);
  if (total != "*" && !(r.total = parse_u64(total))) return std::nullopt;
  if (span == "*") return r;
  const size_t dash = span.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  r.first = parse_u64(span.substr(0, dash));
  r.last = parse_u64(span.substr(dash + 1));
  if (!r.first || !r.last) return std::nullopt;
  return r;
}

std::string Request::describe() const {
  return ranged ? cat(method, " ", url, " (bytes ", offset, "-", last(), ")") : cat(method, " ", url);
}

void Reply::header_line(std::string_view raw) {
  const std::string_view line = trim(raw);
  if (line.starts_with("HTTP/")) {
    // A new reply (after a redirect or a 1xx): forget the previous one.
    *this = Reply();
    const size_t sp = line.find(' ');
    const std::string_view rest = sp == std::string_view::npos ? "" : trim(line.substr(sp + 1));
    status = static_cast<long>(parse_u64(rest.substr(0, 3)).value_or(0));
    if (rest.size() > 3) reason = std::string(trim(rest.substr(3)));
  } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    headers[lowercase(trim(line.substr(0, colon)))] = std::string(trim(line.substr(colon + 1)));
  }
}

std::string Reply::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string Reply::status_text() const {
  return reason.empty() ? cat("HTTP ", status) : cat("HTTP ", status, " ", reason);
}

size_t accept_body(Reply& reply, const Request& request, const BodySink& sink, const char* data, size_t len) {
  const uint64_t at = reply.body_bytes;
  reply.body_bytes += len;
  if (!is_2xx(reply.status)) {
    if (reply.body_bytes <= kMaxErrorBody) return len;  // dropped
    reply.cut = Cut::ErrorBodyTooLong;
    return 0;
  }
  if (sink.dest) {
    // Never write past dest; a 200 would be the whole file: stop it at once.
    if (reply.status != 206) return reply.cut = Cut::NotPartial, 0;
    if (reply.body_bytes > request.n) return reply.cut = Cut::TooLong, 0;
    if (len) std::memcpy(sink.dest + at, data, len);
    return len;
  }
  if (reply.body_bytes > request.max_bytes) return reply.cut = Cut::TooLong, 0;
  if (sink.text) sink.text->append(data, len);
  return len;
}

Outcome judge_status(const Request& r, const Reply& reply) {
  const long s = reply.status;
  if (r.ranged ? s == 206 : is_2xx(s) && s != 206) return {};
  const std::string http = reply.status_text();
  if (s == 404 || s == 410) return {Verdict::NotFound, cat("not found on the mirror (", http, ")")};
  if (s == 412 && !r.if_match.empty())
    return fatal(cat("the file changed on the mirror since setup (", http, ": its ETag is no longer ", r.if_match,
                     "); run setup again"));
  if (s == 416) {
    auto cr = parse_content_range(reply.header("content-range"));
    return fatal(cat("the range is not in the file (", http,
                     cr && cr->total ? cat("; the file has ", *cr->total, " bytes") : std::string(), ")"));
  }
  if (r.ranged && s == 200)
    return fatal(cat("the server ignored the byte range and sent the whole file (HTTP 200 instead of 206 Partial "
                     "Content): the mirror must support range requests"));
  if (s == 408 || s == 429 || s >= 500) return retry(http);
  return fatal(cat("unexpected ", http));
}

Outcome judge_range(const Request& r, const Reply& reply) {
  if (reply.cut == Cut::TooLong) return retry(cat("the reply body is longer than the ", r.n, " bytes asked for"));
  const std::string header = reply.header("content-range");
  if (header.empty()) return retry("the 206 reply has no Content-Range");
  auto cr = parse_content_range(header);
  // A well-formed reply naming another file size is not a transient fault:
  // the file was replaced, or the range runs past its end (servers then send
  // what there is, "bytes a-<size-1>/<size>").
  if (cr && cr->total && r.total && *cr->total != *r.total)
    return fatal(cat("the file changed on the mirror since setup: it is ", *cr->total, " bytes, not ", *r.total,
                     " (Content-Range \"", header, "\"); run setup again"));
  if (cr && cr->total && r.last() >= *cr->total)
    return fatal(cat("the range goes beyond the end of the file (", *cr->total, " bytes)"));
  // A recorded size must be named too: "bytes a-b/*" would let a replaced
  // file of another size pass.
  if (!cr || cr->first != r.offset || cr->last != r.last() || (r.total && cr->total != r.total))
    return retry(cat("the reply's Content-Range is \"", header, "\", not \"bytes ", r.offset, "-", r.last(), "/",
                     r.total ? std::to_string(*r.total) : std::string("<size>"), "\""));
  if (reply.body_bytes != r.n) return retry(cat("the reply body is ", reply.body_bytes, " bytes, not ", r.n));
  return {};
}

Outcome judge_reply(const Request& r, const Reply& reply) {
  if (Outcome o = judge_status(r, reply); o.verdict != Verdict::Ok) return o;
  if (r.ranged) return judge_range(r, reply);
  if (reply.cut == Cut::TooLong) return fatal(cat("the file is larger than the ", r.max_bytes, " bytes allowed"));
  return {};
}

RemoteFileInfo head_info(const Request& r, const Reply& reply) {
  const std::string length = reply.header("content-length");
  const auto bytes = parse_u64(length);
  if (!bytes)
    fail(r.describe(), ": the reply has ", length.empty() ? "no Content-Length" : cat("Content-Length \"", length, "\""),
         ", so the file's size is unknown");
  RemoteFileInfo info;
  info.bytes = *bytes;
  info.etag = reply.header("etag");
  info.accepts_ranges = lowercase(reply.header("accept-ranges")).find("bytes") != std::string::npos;
  return info;
}

}  // namespace mirror

std::vector<std::pair<std::string, std::string>> parse_sha256sums(const std::string& text, const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  std::map<std::string, size_t> line_of;  // name -> the line that listed it
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    bool hex = line.size() > 66;
    for (size_t i = 0; hex && i < 64; ++i) hex = std::isxdigit(static_cast<unsigned char>(line[i]));
    if (!hex || line[64] != ' ' || (line[65] != ' ' && line[65] != '*'))
      fail(where, ": line ", line_no, ": expected \"<64 hex digits>  <file name>\", got \"", line.substr(0, 80), "\"");
    std::string name = line.substr(66), digest = line.substr(0, 64);
    // A control byte (a second CR before the LF, say) would stay in the name,
    // which then matches no file: its digest would silently check nothing.
    for (const char c : name)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        fail(where, ": line ", line_no, ": the file name holds the control byte 0x",
             "0123456789abcdef"[static_cast<unsigned char>(c) >> 4], "0123456789abcdef"[c & 15]);
    for (char& c : digest) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (auto [it, fresh] = line_of.emplace(name, line_no); !fresh)
      fail(where, ": line ", line_no, ": \"", name, "\" is listed twice (first on line ", it->second, ")");
    out.push_back({std::move(name), std::move(digest)});
  }
  return out;
}

}  // namespace deltafin
