// The HTTP/1.x request parser (request_parser.h): what is accepted and why.
#include "server/http/request_parser.h"

#include "tokenizer/utf8.h"

#include <algorithm>
#include <cctype>

namespace deltafin::http {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 tchar: the characters of a method or a field name.
bool is_tchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

// Field value bytes: HTAB, SP, visible ASCII and obs-text; no other controls.
bool is_field_value(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == '\t' || (c >= 0x20 && c != 0x7F);
  });
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Splits a comma-separated field value into trimmed, lower-cased items.
std::vector<std::string> list_items(std::string_view value) {
  std::vector<std::string> items;
  size_t at = 0;
  while (at <= value.size()) {
    const size_t comma = std::min(value.find(',', at), value.size());
    const std::string_view item = trim(value.substr(at, comma - at));
    if (!item.empty()) items.push_back(lower(item));
    at = comma + 1;
  }
  return items;
}

}  // namespace

std::optional<std::string> Request::header(std::string_view name) const {
  const std::string key = lower(name);
  for (const auto& [k, v] : headers)
    if (k == key) return v;
  return std::nullopt;
}

bool valid_utf8(std::string_view s) { return utf8_invalid_offset(s) == kUtf8Valid; }

std::string printable(std::string_view s, size_t max) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::optional<std::string> decode_path(std::string_view raw, std::string& why) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '%') {
      out += raw[i];
      continue;
    }
    const int hi = i + 1 < raw.size() ? hex_value(raw[i + 1]) : -1;
    const int lo = i + 2 < raw.size() ? hex_value(raw[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      why = "an invalid percent-escape at byte " + std::to_string(i) + " (expected %XX with two hex digits)";
      return std::nullopt;
    }
    const char byte = static_cast<char>(hi * 16 + lo);
    if (byte == '\0') {
      why = "a percent-escape that decodes to a NUL byte at byte " + std::to_string(i);
      return std::nullopt;
    }
    out += byte;
    i += 2;
  }
  if (!valid_utf8(out)) {
    why = "percent-escapes that decode to bytes that are not valid UTF-8";
    return std::nullopt;
  }
  return out;
}

bool RequestParser::fail(int status, std::string message, std::string code) {
  error_ = {status, std::move(message), std::move(code)};
  state_ = State::Failed;
  return false;
}

void RequestParser::reset() {
  state_ = State::Head;
  req_ = Request();
  error_ = Error();
  seen_ = 0;
  scanned_ = 0;
  head_lines_ = 0;
  body_mode_ = BodyMode::None;
  body_left_ = 0;
  chunk_step_ = ChunkStep::Size;
  trailer_bytes_ = trailer_count_ = 0;
}

RequestParser::State RequestParser::consume(std::string& in) {
  if (state_ == State::Head && !parse_head(in)) return state_;
  if (state_ == State::Body) {
    // The body is parsed at an offset and the used bytes erased once: a body
    // of many tiny chunks must cost linear time, not a buffer move per chunk.
    size_t at = 0;
    parse_body(in, at);
    in.erase(0, at);
  }
  return state_;
}

// Finds the blank line that ends the head; false while it has not come (or on
// failure). Empty lines before the request line are skipped (RFC 9112 §2.2).
bool RequestParser::parse_head(std::string& in) {
  if (scanned_ == 0) {
    size_t skip = 0;
    while (skip < in.size() && (in[skip] == '\r' || in[skip] == '\n')) ++skip;
    if (skip > 0) {
      in.erase(0, skip);
      seen_ += skip;
    }
    if (seen_ > limits_.max_head_bytes)
      return fail(431, "The request sent more than " + std::to_string(limits_.max_head_bytes) +
                           " bytes of blank lines before its request line", "header_too_large");
  }
  // Both limits are checked in the order the bytes came, so the answer does
  // not depend on how the bytes were split into reads.
  size_t end = std::string::npos;
  for (size_t i = scanned_; i < in.size(); ++i) {
    if (i >= limits_.max_head_bytes)
      return fail(431, "The request's header block is larger than the server's limit of " +
                           std::to_string(limits_.max_head_bytes) + " bytes", "header_too_large");
    if (in[i] != '\n') continue;
    if ((i >= 1 && in[i - 1] == '\n') || (i >= 2 && in[i - 1] == '\r' && in[i - 2] == '\n')) {
      end = i + 1;
      break;
    }
    // Lines (the request line, then one per field) are counted as they come,
    // so a flood of tiny header lines is refused at the field limit rather
    // than at the byte cap.
    if (++head_lines_ > limits_.max_headers + 1)
      return fail(431, "The request has more than " + std::to_string(limits_.max_headers) + " header fields",
                  "too_many_headers");
  }
  if (end == std::string::npos) {
    scanned_ = in.size();
    return false;
  }
  const std::string head = in.substr(0, end);
  in.erase(0, end);
  seen_ += end;
  scanned_ = 0;
  head_lines_ = 0;
  return finish_head(head);
}

bool RequestParser::finish_head(std::string_view head) {
  std::vector<std::string_view> lines;
  size_t at = 0;
  while (at < head.size()) {
    size_t nl = head.find('\n', at);
    if (nl == std::string_view::npos) nl = head.size();
    std::string_view line = head.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    at = nl + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty()) return fail(400, "The request has no request line", "bad_request");
  if (lines.size() - 1 > limits_.max_headers)
    return fail(431, "The request has " + std::to_string(lines.size() - 1) + " header fields; the limit is " +
                         std::to_string(limits_.max_headers), "too_many_headers");

  // Request line: METHOD SP request-target SP HTTP-version.
  const std::string_view rl = lines[0];
  const size_t sp1 = rl.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : rl.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || rl.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "Malformed request line '" + printable(rl) + "' (expected METHOD TARGET HTTP/1.x)", "bad_request");
  const std::string_view method = rl.substr(0, sp1), target = rl.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = rl.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "Malformed method in the request line '" + printable(rl) + "'", "bad_request");
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || !std::isdigit(static_cast<unsigned char>(version[7])))
    return fail(400, "Unsupported protocol '" + printable(version) + "' (this server speaks HTTP/1.0 and HTTP/1.1)",
                "bad_request");
  req_.method = std::string(method);
  req_.minor_version = version[7] - '0';
  for (char ch : target) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7F)
      return fail(400, "The request target '" + printable(target) + "' holds a byte that must be percent-encoded",
                  "invalid_path");
  }
  req_.target = std::string(target);
  std::string_view path_and_query = target;
  const std::string lt = lower(target.substr(0, std::min<size_t>(8, target.size())));
  if (lt.rfind("http://", 0) == 0 || lt.rfind("https://", 0) == 0) {  // absolute-form: use its path
    const size_t authority = target.find("//") + 2;
    const size_t slash = target.find_first_of("/?", authority);  // where the authority ends
    path_and_query = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  } else if (target == "*") {
    if (method != "OPTIONS") return fail(400, "The request target '*' is for OPTIONS only", "invalid_path");
  } else if (target.empty() || target[0] != '/') {
    return fail(400, "The request target '" + printable(target) + "' is not a path starting with '/'", "invalid_path");
  }
  const size_t q = path_and_query.find('?');
  const std::string_view raw_path = q == 0 ? std::string_view("/") : path_and_query.substr(0, q);  // "http://h?x"
  if (q != std::string_view::npos) req_.query = std::string(path_and_query.substr(q + 1));
  std::string why;
  std::optional<std::string> path = decode_path(raw_path, why);
  if (!path) return fail(400, "The request path '" + printable(raw_path) + "' has " + why, "invalid_path");
  req_.path = std::move(*path);

  // Header fields.
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line[0] == ' ' || line[0] == '\t')
      return fail(400, "Header line " + std::to_string(i) + " is a continuation (obsolete line folding is not accepted)",
                  "bad_header");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return fail(400, "Malformed header line " + std::to_string(i) + " '" + printable(line, 80) +
                           "' (expected Name: value, the name a token)", "bad_header");
    const std::string_view value = trim(line.substr(colon + 1));
    const std::string name = lower(line.substr(0, colon));
    if (!is_field_value(value))
      return fail(400, "The value of header '" + printable(name) + "' holds a control byte", "bad_header");
    if (!valid_utf8(value))
      return fail(400, "The value of header '" + printable(name) + "' is not valid UTF-8", "bad_header");
    req_.headers.emplace_back(name, std::string(value));
  }

  // Framing, compression, expectations, persistence.
  std::optional<uint64_t> length;
  std::vector<std::string> codings;
  bool has_te = false;
  for (const auto& [name, value] : req_.headers) {
    if (name == "content-length") {
      for (const std::string& item : list_items(value)) {
        if (item.empty() || item.size() > 18 ||
            !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; }))
          return fail(400, "Header 'Content-Length' is not a byte count: '" + printable(value, 40) + "'", "bad_header");
        const uint64_t n = std::stoull(item);
        if (length && *length != n)
          return fail(400, "Header 'Content-Length' is given twice with different values", "bad_header");
        length = n;
      }
      if (!length) return fail(400, "Header 'Content-Length' is empty", "bad_header");
    } else if (name == "transfer-encoding") {
      has_te = true;
      for (std::string& item : list_items(value)) codings.push_back(std::move(item));
    } else if (name == "content-encoding") {
      for (const std::string& item : list_items(value))
        if (item != "identity")
          return fail(415, "Content-Encoding '" + printable(value, 40) +
                               "' is not supported: send the request body uncompressed", "unsupported_encoding");
    } else if (name == "expect") {
      if (lower(value) != "100-continue")
        return fail(417, "Header 'Expect: " + printable(value, 40) + "' cannot be met (only 100-continue)",
                    "expectation_failed");
      req_.expect_continue = req_.minor_version >= 1;
    } else if (name == "connection") {
      for (const std::string& item : list_items(value))
        if (item == "close") req_.keep_alive = false;
    }
  }
  // HTTP/1.0 connections close after one response: no chunked replies exist
  // there, so a streamed reply is delimited by the close anyway.
  if (req_.minor_version == 0) req_.keep_alive = false;
  if (has_te) {
    if (req_.minor_version == 0)
      return fail(400, "Transfer-Encoding is not defined for HTTP/1.0 requests", "bad_request");
    if (length) return fail(400, "A request may not carry both Content-Length and Transfer-Encoding", "bad_request");
    if (codings.size() != 1 || codings[0] != "chunked")
      return fail(400, "Transfer-Encoding must be exactly 'chunked' (compressed transfer codings are not accepted)",
                  "unsupported_encoding");
    body_mode_ = BodyMode::Chunked;
    req_.chunked = true;
  } else if (length && *length > 0) {
    if (*length > limits_.max_body_bytes)
      return fail(413, "The request body (" + std::to_string(*length) + " bytes) is larger than the server's limit of " +
                           std::to_string(limits_.max_body_bytes) + " bytes (--max-request-bytes)", "request_too_large");
    body_mode_ = BodyMode::Length;
    body_left_ = *length;  // not reserved up front: a declared length costs nothing until its bytes come
  }
  if (body_mode_ == BodyMode::None) req_.expect_continue = false;
  state_ = body_mode_ == BodyMode::None ? State::Done : State::Body;
  return true;
}

bool RequestParser::parse_body(const std::string& in, size_t& at) {
  if (body_mode_ == BodyMode::Chunked) return parse_chunked(in, at);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(body_left_, in.size() - at));
  req_.body.append(in, at, n);
  at += n;
  seen_ += n;
  body_left_ -= n;
  if (body_left_ == 0) state_ = State::Done;
  return true;
}

std::optional<std::string> RequestParser::take_line(const std::string& in, size_t& at, size_t budget, const char* what) {
  const size_t nl = in.find('\n', at);
  if (nl == std::string::npos) {
    if (in.size() - at > budget) fail(400, std::string("A chunked body's ") + what + " line is too long", "bad_chunk");
    return std::nullopt;
  }
  if (nl - at > budget) {
    fail(400, std::string("A chunked body's ") + what + " line is too long", "bad_chunk");
    return std::nullopt;
  }
  std::string line = in.substr(at, nl - at);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  seen_ += nl + 1 - at;
  at = nl + 1;
  return line;
}

// Chunked body (RFC 9112 §7.1): size line (hex, optional extensions), data,
// CRLF, ..., a zero size, trailer fields, a blank line. The body limit applies
// to the sum of the chunks, checked before a chunk's bytes are buffered.
bool RequestParser::parse_chunked(const std::string& in, size_t& at) {
  constexpr size_t kSizeLine = 4096;
  while (state_ == State::Body) {
    if (chunk_step_ == ChunkStep::Size) {
      std::optional<std::string> line = take_line(in, at, kSizeLine, "chunk-size");
      if (!line) return false;
      std::string_view s = *line;
      const size_t ext = s.find(';');
      const std::string_view digits = trim(s.substr(0, ext));
      if (digits.empty() || digits.size() > 15 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return hex_value(c) >= 0; }))
        return fail(400, "A chunked body has a malformed chunk size '" + printable(s, 40) + "'", "bad_chunk");
      uint64_t size = 0;
      for (char c : digits) size = size * 16 + static_cast<uint64_t>(hex_value(c));
      if (size == 0) {
        chunk_step_ = ChunkStep::Trailers;
        continue;
      }
      if (req_.body.size() + size > limits_.max_body_bytes)
        return fail(413, "The chunked request body is larger than the server's limit of " +
                             std::to_string(limits_.max_body_bytes) + " bytes (--max-request-bytes)",
                    "request_too_large");
      body_left_ = size;
      chunk_step_ = ChunkStep::Data;
    } else if (chunk_step_ == ChunkStep::Data) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(body_left_, in.size() - at));
      req_.body.append(in, at, n);
      at += n;
      seen_ += n;
      body_left_ -= n;
      if (body_left_ > 0) return false;
      chunk_step_ = ChunkStep::DataEnd;
    } else if (chunk_step_ == ChunkStep::DataEnd) {
      std::optional<std::string> line = take_line(in, at, 2, "chunk-end");
      if (!line) return false;
      if (!line->empty()) return fail(400, "A chunk of the body is longer than its declared size", "bad_chunk");
      chunk_step_ = ChunkStep::Size;
    } else {  // Trailers: fields (ignored) up to a blank line, under the head limits.
      const size_t nl = in.find('\n', at);
      if (trailer_bytes_ + (nl == std::string::npos ? in.size() - at : nl + 1 - at) > limits_.max_head_bytes)
        return fail(431, "The chunked body's trailer block is larger than the server's limit of " +
                             std::to_string(limits_.max_head_bytes) + " bytes", "header_too_large");
      std::optional<std::string> line = take_line(in, at, limits_.max_head_bytes, "trailer");
      if (!line) return false;
      trailer_bytes_ += line->size() + 2;
      if (line->empty()) {
        state_ = State::Done;
        return true;
      }
      if (++trailer_count_ > limits_.max_headers || trailer_bytes_ > limits_.max_head_bytes)
        return fail(431, "The chunked body's trailer block exceeds the header limits", "header_too_large");
      const size_t colon = line->find(':');
      if (colon == std::string::npos || !is_token(std::string_view(*line).substr(0, colon)))
        return fail(400, "A chunked body has a malformed trailer line '" + printable(*line, 80) + "'", "bad_chunk");
    }
  }
  return state_ == State::Done;
}

}  // namespace deltafin::http
