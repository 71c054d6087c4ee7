// What a mirror's reply means, without the network: HttpClient's libcurl
// callbacks hand each header line and each piece of the body to a Reply, and
// the functions here judge it against the Request (the status, a range
// reply's Content-Range and length, a body over its limit) and read a HEAD
// reply's size and ETag. Everything the mirror sends passes through them, so
// they are pure functions of its bytes: unit-tested one by one and fuzzed
// (fuzz/mirror_fuzz.cpp) without a server. The mirror's checksum list
// (SHA256SUMS) is read here too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deltafin {

// What the mirror says about one file (HEAD).
struct RemoteFileInfo {
  uint64_t bytes = 0;
  std::string etag;           // as sent (quotes kept), "" when the server sends none
  bool accepts_ranges = false;  // "Accept-Ranges: bytes"
};

namespace mirror {

// The body of an error reply (an HTML 500 page) is read and dropped so the
// kept-alive connection stays usable; one larger than this is cut off.
inline constexpr uint64_t kMaxErrorBody = 1 << 20;

// A whole decimal number (no sign, no spaces, at most 20 digits); nullopt
// otherwise or on overflow.
std::optional<uint64_t> parse_u64(std::string_view s);

// "bytes a-b/total" (total may be "*"); also "bytes */total" as sent with 416.
struct ContentRange {
  std::optional<uint64_t> first, last, total;
};
std::optional<ContentRange> parse_content_range(std::string_view value);

// What one request asks for.
struct Request {
  const char* method = "GET";  // for messages; "HEAD" asks for no body
  std::string url;
  bool ranged = false;
  uint64_t offset = 0, n = 0;        // ranged: bytes [offset, offset + n), n >= 1
  std::string if_match;
  std::optional<uint64_t> total;     // ranged: the file size the reply must name
  uint64_t max_bytes = 0;            // get: the largest body accepted

  uint64_t last() const { return offset + n - 1; }
  // "GET http://host/file (bytes 100-199)": the subject of every message.
  std::string describe() const;
};

// Why accept_body stopped a transfer (the callback then returns 0, curl
// fails with CURLE_WRITE_ERROR and closes the connection).
enum class Cut { None, TooLong, NotPartial, ErrorBodyTooLong };

// The final reply of one attempt: header_line() forgets what came before at
// each status line, so the headers of redirects and 1xx replies are dropped.
struct Reply {
  long status = 0;
  std::string reason;
  std::map<std::string, std::string> headers;  // names lowercased, values trimmed; the last of repeats
  uint64_t body_bytes = 0;
  Cut cut = Cut::None;

  // One header line as curl hands it over (with its CR LF): a status line
  // "HTTP/1.1 206 Partial Content" starts a new reply, "Name: value" adds a
  // field, anything else (the blank line ending the head) is ignored.
  void header_line(std::string_view line);
  std::string header(const std::string& name) const;  // "" when absent
  std::string status_text() const;                   // "HTTP 206 Partial Content"
};

// Where a body goes: `text` for a get (up to request.max_bytes), `dest` for a
// range (exactly request.n bytes; never written past).
struct BodySink {
  std::string* text = nullptr;
  uint8_t* dest = nullptr;
};

// One piece of the body: stored, dropped (the body of an error reply) or
// refused. Returns the bytes taken; fewer than `len` stops the transfer,
// with reply.cut saying why.
size_t accept_body(Reply& reply, const Request& request, const BodySink& sink, const char* data, size_t len);

enum class Verdict { Ok, Retry, Fatal, NotFound };
struct Outcome {
  Verdict verdict = Verdict::Ok;
  std::string failure;  // what went wrong, for the message; empty when Ok
};

// The status against what the request expects: 206 for a range, any other
// 2xx otherwise; 404/410 are NotFound, 408/429/5xx may pass on another try.
Outcome judge_status(const Request& request, const Reply& reply);
// A 206 reply must be exactly the asked range: the Content-Range names
// [offset, last] (and the recorded total, if any) and the body has n bytes.
Outcome judge_range(const Request& request, const Reply& reply);
// A whole reply that curl delivered: the status, then the range (ranged) or
// the body limit (get).
Outcome judge_reply(const Request& request, const Reply& reply);

// A HEAD reply judged Ok: the file's size (Content-Length, required), ETag
// and range support. Throws deltafin::Error naming the request otherwise.
RemoteFileInfo head_info(const Request& request, const Reply& reply);

}  // namespace mirror

// Parses a sha256sum-style list ("<64 hex>  <name>" per line, '*' before the
// name allowed, CR LF accepted) into (name, lowercase digest) pairs in file
// order; errors name the line. A name listed twice is refused (the list
// would not say which digest holds), and so is one holding a control byte (it
// would match no file).
std::vector<std::pair<std::string, std::string>> parse_sha256sums(const std::string& text, const std::string& where);

}  // namespace deltafin
