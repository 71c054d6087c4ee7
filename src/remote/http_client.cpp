// HttpClient over one libcurl easy handle. A request is a loop of attempts;
// each attempt is one curl_easy_perform whose result (curl code, status,
// headers, body) is judged by a small function that says Ok, Retry, Fatal or
// NotFound together with what went wrong, so the retry policy lives in one
// place (with_retries) and every error message has the same shape:
//   GET <url> (bytes a-b): <what went wrong>; gave up after N attempts
// The callbacks only hand the mirror's bytes to remote/mirror_reply.h, where
// they are parsed and judged (and fuzzed) without the network.
#include "remote/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <thread>

namespace deltafin {
namespace {

using mirror::Outcome;
using mirror::Reply;
using mirror::Request;
using mirror::Verdict;

// Redirects are followed, at most this many: mirrors that keep large files on
// a CDN answer a file's URL with a redirect to the storage host (the Hugging
// Face hub's resolve/ URLs do), so following none would rule them out; a
// bound still ends loops and chains that go nowhere. Only http(s) targets are
// allowed (see kProtocols), and Range / If-Match go along to the new host,
// which is what a range request needs.
constexpr long kMaxRedirects = 5;
constexpr const char* kProtocols = "http,https";

// libcurl's receive buffer. The default 16 KiB means a callback per 16 KiB of
// an expert record; larger buffers cut that overhead for multi-MB ranges.
constexpr long kReceiveBuffer = 512 * 1024;

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
        : impl(i), req(r), sink{text_sink, dest_sink} {}
    Impl* impl;
    const Request* req;
    mirror::BodySink sink;  // get: text; get_range: dest, req->n bytes
    Reply resp;
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
    t->resp.header_line(std::string_view(data, len));
    return len;
  }

  // Returning less than len aborts the transfer (CURLE_WRITE_ERROR).
  static size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = size * count;
    t->impl->bytes_received += len;
    return mirror::accept_body(t->resp, *t->req, t->sink, data, len);
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
    if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && t.resp.cut != mirror::Cut::None)) return {};
    // errbuf has the details ("Failed to connect to host port 443 after 3 ms:
    // Couldn't connect to server"); the code's text is added when it is not there.
    const std::string detail = errbuf, code = curl_easy_strerror(rc);
    const std::string what =
        detail.empty() ? code : detail.find(code) != std::string::npos ? detail : cat(detail, " (", code, ")");
    return {retryable(rc) ? Verdict::Retry : Verdict::Fatal, what};
  }

  Outcome attempt(const Request& r, Transfer& t) {
    t.resp = Reply();
    if (t.sink.text) t.sink.text->clear();
    const CURLcode rc = perform(t);
    if (Outcome o = judge_curl(rc, t); o.verdict != Verdict::Ok) return o;
    return mirror::judge_reply(r, t.resp);
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
  return mirror::head_info(r, t.resp);
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
