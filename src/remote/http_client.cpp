// HttpClient over one libcurl easy handle. A request is a loop of attempts;
// each attempt is one curl_easy_perform whose result (curl code, status,
// headers, body) is judged by a small function that says Ok, Retry, Fatal or
// NotFound together with what went wrong, so the retry policy lives in one
// place (with_retries) and every error message has the same shape:
//   GET <url> (bytes a-b): <what went wrong>; gave up after N attempts
#include "remote/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string_view>
#include <thread>

namespace deltafin {
namespace {

// Redirects are followed, at most this many: mirrors that keep large files on
// a CDN answer a file's URL with a redirect to the storage host (the Hugging
// Face hub's resolve/ URLs do), so following none would rule them out; a
// bound still ends loops and chains that go nowhere. Only http(s) targets are
// allowed (see kProtocols), and Range / If-Match go along to the new host,
// which is what a range request needs.
constexpr long kMaxRedirects = 5;
constexpr const char* kProtocols = "http,https";

// The body of an error reply (an HTML 500 page) is read and dropped so the
// kept-alive connection stays usable; one larger than this is cut off.
constexpr uint64_t kMaxErrorBody = 1 << 20;

// libcurl's receive buffer. The default 16 KiB means a callback per 16 KiB of
// an expert record; larger buffers cut that overhead for multi-MB ranges.
constexpr long kReceiveBuffer = 512 * 1024;

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

// A whole decimal number (no sign, no spaces); nullopt otherwise or on overflow.
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

// "bytes a-b/total" (total may be "*"); also "bytes */total" as sent with 416.
struct ContentRange {
  std::optional<uint64_t> first, last, total;
};

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

// Failures that may pass on another try: the network, a busy or restarting
// server. Everything else (a bad URL, an unsupported protocol, a certificate
// that does not verify, too many redirects) would fail the same way again.
bool retryable(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:  // also the low-speed limit (a stalled mirror)
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:          // connection reset
    case CURLE_GOT_NOTHING:         // closed without a reply
    case CURLE_PARTIAL_FILE:        // closed before Content-Length bytes
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
      return true;
    default:
      return false;
  }
}

// What one request asks for.
struct Request {
  const char* method = "GET";  // for messages; HEAD sets CURLOPT_NOBODY
  std::string url;
  bool ranged = false;
  uint64_t offset = 0, n = 0;        // ranged: bytes [offset, offset + n)
  std::string if_match;
  std::optional<uint64_t> total;     // ranged: the file size the reply must name
  uint64_t max_bytes = 0;            // get: the largest body accepted

  uint64_t last() const { return offset + n - 1; }
  // "GET http://host/file (bytes 100-199)": the subject of every message.
  std::string describe() const {
    return ranged ? cat(method, " ", url, " (bytes ", offset, "-", last(), ")") : cat(method, " ", url);
  }
};

// Why the body callback stopped a transfer (it returns 0, curl then fails
// with CURLE_WRITE_ERROR and closes the connection).
enum class Cut { None, TooLong, NotPartial, ErrorBodyTooLong };

// The final reply of one attempt (headers of redirects and 1xx replies are
// dropped as the next status line arrives).
struct Response {
  long status = 0;
  std::string reason;
  std::map<std::string, std::string> headers;  // names lowercased; the last of repeats
  uint64_t body_bytes = 0;
  Cut cut = Cut::None;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  std::string status_text() const { return reason.empty() ? cat("HTTP ", status) : cat("HTTP ", status, " ", reason); }
};

enum class Verdict { Ok, Retry, Fatal, NotFound };
struct Outcome {
  Verdict verdict = Verdict::Ok;
  std::string failure;  // what went wrong, for the message
};

Outcome retry(std::string why) { return {Verdict::Retry, std::move(why)}; }
Outcome fatal(std::string why) { return {Verdict::Fatal, std::move(why)}; }

// The status against what the request expects: 206 for a range, any other
// 2xx otherwise.
Outcome judge_status(const Request& r, const Response& resp) {
  const long s = resp.status;
  if (r.ranged ? s == 206 : is_2xx(s) && s != 206) return {};
  const std::string http = resp.status_text();
  if (s == 404 || s == 410) return {Verdict::NotFound, cat("not found on the mirror (", http, ")")};
  if (s == 412 && !r.if_match.empty())
    return fatal(cat("the file changed on the mirror since setup (", http, ": its ETag is no longer ", r.if_match,
                     "); run setup again"));
  if (s == 416) {
    auto cr = parse_content_range(resp.header("content-range"));
    return fatal(cat("the range is not in the file (", http,
                     cr && cr->total ? cat("; the file has ", *cr->total, " bytes") : std::string(), ")"));
  }
  if (r.ranged && s == 200)
    return fatal(cat("the server ignored the byte range and sent the whole file (HTTP 200 instead of 206 Partial "
                     "Content): the mirror must support range requests"));
  if (s == 408 || s == 429 || s >= 500) return retry(http);
  return fatal(cat("unexpected ", http));
}

// A 206 reply must be exactly the asked range: a proxy or a buggy server that
// sends another range (or the right range with a wrong body length) would
// otherwise put wrong bytes in place.
Outcome judge_range(const Request& r, const Response& resp) {
  if (resp.cut == Cut::TooLong) return retry(cat("the reply body is longer than the ", r.n, " bytes asked for"));
  const std::string header = resp.header("content-range");
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
  if (!cr || cr->first != r.offset || cr->last != r.last())
    return retry(cat("the reply's Content-Range is \"", header, "\", not \"bytes ", r.offset, "-", r.last(), "/",
                     r.total ? std::to_string(*r.total) : std::string("<size>"), "\""));
  if (resp.body_bytes != r.n) return retry(cat("the reply body is ", resp.body_bytes, " bytes, not ", r.n));
  return {};
}

}  // namespace

void http_global_init() {
  static std::once_flag once;
  // curl_global_init is not thread-safe and must run before any easy handle.
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) fail("curl_global_init failed");
  });
}

struct HttpClient::Impl {
  HttpOptions options;
  CURL* curl = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::atomic<uint64_t> bytes_received{0}, requests{0}, retries{0};

  // One attempt's state, reached from the callbacks through their user pointer.
  struct Transfer {
    Transfer(Impl* i, const Request* r, std::string* text_sink = nullptr, uint8_t* dest_sink = nullptr)
        : impl(i), req(r), text(text_sink), dest(dest_sink) {}
    Impl* impl;
    const Request* req;
    std::string* text;  // get: the body goes here
    uint8_t* dest;      // get_range: the body goes here, req->n bytes
    Response resp;
  };

  explicit Impl(HttpOptions o) : options(std::move(o)) {
    http_global_init();
    curl = curl_easy_init();
    if (!curl) fail("curl_easy_init failed");
    configure();
  }
  ~Impl() { curl_easy_cleanup(curl); }

  // libcurl calls this often during a transfer; non-zero aborts it.
  static int on_progress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Impl*>(self)->options.cancelled() ? 1 : 0;
  }

  void check_cancelled(const Request& r) const {
    if (options.cancelled && options.cancelled()) fail(r.describe(), ": interrupted");
  }

  // Options that hold for every request of this client.
  void configure() {
    set(CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: clients live in worker threads
    set(CURLOPT_ERRORBUFFER, errbuf);
    set(CURLOPT_USERAGENT, options.user_agent.c_str());
    set(CURLOPT_PROTOCOLS_STR, kProtocols);
    set(CURLOPT_REDIR_PROTOCOLS_STR, kProtocols);
    set(CURLOPT_FOLLOWLOCATION, 1L);
    set(CURLOPT_MAXREDIRS, kMaxRedirects);
    set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::max(1.0, options.connect_timeout_s * 1000)));
    // Whole seconds for curl; never 0 (that would turn the check off).
    set(CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::max(1.0, std::ceil(options.low_speed_time_s))));
    set(CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options.low_speed_bytes_per_s));
    set(CURLOPT_TCP_KEEPALIVE, 1L);
    set(CURLOPT_BUFFERSIZE, kReceiveBuffer);
    if (options.cancelled) {
      set(CURLOPT_NOPROGRESS, 0L);
      set(CURLOPT_XFERINFOFUNCTION, &Impl::on_progress);
      set(CURLOPT_XFERINFODATA, this);
    }
    set(CURLOPT_HEADERFUNCTION, &Impl::on_header);
    set(CURLOPT_WRITEFUNCTION, &Impl::on_body);
    // No CURLOPT_ACCEPT_ENCODING: byte ranges are of the file as stored.
  }

  template <typename T>
  void set(CURLoption opt, T value) {
    const CURLcode rc = curl_easy_setopt(curl, opt, value);
    if (rc != CURLE_OK) fail("curl_easy_setopt(", static_cast<int>(opt), "): ", curl_easy_strerror(rc));
  }

  static size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = size * count;
    const std::string_view line = trim(std::string_view(data, len));
    if (line.starts_with("HTTP/")) {
      // A new reply (after a redirect or a 1xx): forget the previous one.
      t->resp = Response();
      const size_t sp = line.find(' ');
      const std::string_view rest = sp == std::string_view::npos ? "" : trim(line.substr(sp + 1));
      t->resp.status = static_cast<long>(parse_u64(rest.substr(0, 3)).value_or(0));
      if (rest.size() > 3) t->resp.reason = std::string(trim(rest.substr(3)));
    } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
      t->resp.headers[lowercase(trim(line.substr(0, colon)))] = std::string(trim(line.substr(colon + 1)));
    }
    return len;
  }

  // Returning less than len aborts the transfer (CURLE_WRITE_ERROR).
  static size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = size * count;
    Response& resp = t->resp;
    const uint64_t at = resp.body_bytes;
    resp.body_bytes += len;
    t->impl->bytes_received += len;
    if (!is_2xx(resp.status)) {
      if (resp.body_bytes <= kMaxErrorBody) return len;  // dropped
      resp.cut = Cut::ErrorBodyTooLong;
      return 0;
    }
    if (t->dest) {
      // Never write past dest; a 200 would be the whole file: stop it at once.
      if (resp.status != 206) return resp.cut = Cut::NotPartial, 0;
      if (resp.body_bytes > t->req->n) return resp.cut = Cut::TooLong, 0;
      std::memcpy(t->dest + at, data, len);
      return len;
    }
    if (resp.body_bytes > t->req->max_bytes) return resp.cut = Cut::TooLong, 0;
    t->text->append(data, len);
    return len;
  }

  // Sends the request once; t.resp holds the reply.
  CURLcode perform(Transfer& t) {
    const Request& r = *t.req;
    set(CURLOPT_URL, r.url.c_str());
    if (std::strcmp(r.method, "HEAD") == 0) {
      set(CURLOPT_NOBODY, 1L);
    } else {
      set(CURLOPT_HTTPGET, 1L);  // also undoes a previous HEAD's NOBODY
    }
    const std::string range = r.ranged ? cat(r.offset, "-", r.last()) : std::string();
    set(CURLOPT_RANGE, r.ranged ? range.c_str() : nullptr);  // sent as "Range: bytes=a-b"
    curl_slist* headers = nullptr;
    // A weak ETag (W/"...") never matches If-Match (RFC 9110 §13.1.1); the
    // Content-Range total and the hash checks still catch a changed file.
    if (!r.if_match.empty() && r.if_match.rfind("W/", 0) != 0) {
      headers = curl_slist_append(nullptr, cat("If-Match: ", r.if_match).c_str());
      if (!headers) throw std::bad_alloc();
    }
    set(CURLOPT_HTTPHEADER, headers);
    set(CURLOPT_HEADERDATA, &t);
    set(CURLOPT_WRITEDATA, &t);
    errbuf[0] = '\0';
    ++requests;
    const CURLcode rc = curl_easy_perform(curl);
    set(CURLOPT_HTTPHEADER, static_cast<curl_slist*>(nullptr));
    curl_slist_free_all(headers);
    return rc;
  }

  // A failed transfer: our own cut-off is judged from the reply; curl's
  // errors by their code.
  Outcome judge_curl(CURLcode rc, const Transfer& t) const {
    if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && t.resp.cut != Cut::None)) return {};
    // errbuf has the details ("Failed to connect to host port 443 after 3 ms:
    // Couldn't connect to server"); the code's text is added when it is not there.
    const std::string detail = errbuf, code = curl_easy_strerror(rc);
    const std::string what =
        detail.empty() ? code : detail.find(code) != std::string::npos ? detail : cat(detail, " (", code, ")");
    return {retryable(rc) ? Verdict::Retry : Verdict::Fatal, what};
  }

  Outcome attempt(const Request& r, Transfer& t) {
    t.resp = Response();
    if (t.text) t.text->clear();
    const CURLcode rc = perform(t);
    if (Outcome o = judge_curl(rc, t); o.verdict != Verdict::Ok) return o;
    if (Outcome o = judge_status(r, t.resp); o.verdict != Verdict::Ok) return o;
    if (r.ranged) return judge_range(r, t.resp);
    if (t.resp.cut == Cut::TooLong)
      return fatal(cat("the file is larger than the ", r.max_bytes, " bytes allowed"));
    return {};
  }

  // Attempts until one succeeds, one fails for good, or options.attempts are
  // spent, waiting backoff_s * 2^(k-1) (at most backoff_max_s) before retry k.
  void with_retries(const Request& r, Transfer& t) {
    const int attempts = std::max(1, options.attempts);
    for (int k = 1;; ++k) {
      check_cancelled(r);
      const Outcome o = attempt(r, t);
      check_cancelled(r);  // an aborted transfer reports as interrupted, not as a network failure
      switch (o.verdict) {
        case Verdict::Ok:
          return;
        case Verdict::NotFound:
          throw HttpNotFound(cat(r.describe(), ": ", o.failure));
        case Verdict::Fatal:
          fail(r.describe(), ": ", o.failure, k > 1 ? cat(" (at attempt ", k, ", not retried)") : "");
        case Verdict::Retry:
          break;
      }
      if (k >= attempts) fail(r.describe(), ": ", o.failure, "; gave up after ", k, k == 1 ? " attempt" : " attempts");
      ++retries;
      const double wait = std::min(options.backoff_max_s, options.backoff_s * std::ldexp(1.0, k - 1));
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
  }
};

HttpClient::HttpClient(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpClient::~HttpClient() = default;

std::string HttpClient::join(const std::string& base, const std::string& name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = base;
  if (!out.empty() && out.back() == '/') out.pop_back();  // "http://m/" + "a" is not "http://m//a"
  out += '/';
  for (const unsigned char c : name) {
    // RFC 3986 unreserved characters, plus '/' so names may have directories.
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

RemoteFileInfo HttpClient::head(const std::string& url) {
  Request r;
  r.method = "HEAD";
  r.url = url;
  Impl::Transfer t{impl_.get(), &r};
  impl_->with_retries(r, t);
  const std::string length = t.resp.header("content-length");
  const auto bytes = parse_u64(length);
  if (!bytes)
    fail(r.describe(), ": the reply has ", length.empty() ? "no Content-Length" : cat("Content-Length \"", length, "\""),
         ", so the file's size is unknown");
  RemoteFileInfo info;
  info.bytes = *bytes;
  info.etag = t.resp.header("etag");
  info.accepts_ranges = lowercase(t.resp.header("accept-ranges")).find("bytes") != std::string::npos;
  return info;
}

std::string HttpClient::get(const std::string& url, uint64_t max_bytes) {
  Request r;
  r.url = url;
  r.max_bytes = max_bytes;
  std::string body;
  Impl::Transfer t{impl_.get(), &r, &body};
  impl_->with_retries(r, t);
  return body;
}

std::optional<std::string> HttpClient::get_optional(const std::string& url, uint64_t max_bytes) {
  try {
    return get(url, max_bytes);
  } catch (const HttpNotFound&) {
    return std::nullopt;
  }
}

void HttpClient::get_range(const std::string& url, uint64_t offset, uint64_t n, uint8_t* dest,
                           const std::string& if_match, std::optional<uint64_t> total_bytes) {
  if (n == 0) return;  // "bytes=a-(a-1)" cannot be asked for, and nothing is needed
  if (n - 1 > std::numeric_limits<uint64_t>::max() - offset)
    fail("GET ", url, ": range of ", n, " bytes at offset ", offset, " overflows");
  Request r;
  r.url = url;
  r.ranged = true;
  r.offset = offset;
  r.n = n;
  r.if_match = if_match;
  r.total = total_bytes;
  Impl::Transfer t{impl_.get(), &r, nullptr, dest};
  impl_->with_retries(r, t);
}

uint64_t HttpClient::bytes_received() const { return impl_->bytes_received.load(); }
uint64_t HttpClient::requests() const { return impl_->requests.load(); }
uint64_t HttpClient::retries() const { return impl_->retries.load(); }

}  // namespace deltafin
