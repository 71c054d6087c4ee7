// HTTP(S) access to a mirror that serves a checkpoint's files as URL/<file>
// (setup --stream, the expert fetcher, setup --full). One HttpClient per
// thread: it keeps its connection alive between requests (libcurl easy
// handle). Every request is bounded in time and retried with backoff on
// failures that may pass (connection refused or reset, timeout, HTTP 5xx /
// 429, a short, long or malformed body); errors name the URL, the byte range
// and what went wrong, with the attempts made. Up to 5 redirects are followed
// (http and https only): CDN-backed mirrors answer with one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "remote/mirror_reply.h"
#include "util/error.h"

namespace deltafin {

struct HttpOptions {
  int attempts = 5;                  // tries per request (first + retries)
  double backoff_s = 0.25;           // wait before retry k: backoff_s * 2^(k-1), capped at backoff_max_s
  double backoff_max_s = 4.0;
  double connect_timeout_s = 10.0;
  // A transfer that moves fewer than low_speed_bytes_per_s for
  // low_speed_time_s is abandoned (and retried): a stalled mirror must not
  // hang a run, but a slow, steady one must still work.
  double low_speed_time_s = 20.0;
  uint64_t low_speed_bytes_per_s = 1024;
  std::string user_agent = "deltafin";
  // Polled during transfers and between attempts: when it returns true the
  // request stops at once with an "interrupted" error (Ctrl-C must not wait
  // out a stalled mirror's timeouts and retries). May be empty.
  std::function<bool()> cancelled;
};

// Thrown when a file does not exist on the mirror (HTTP 404 / 410): never
// retried, and callers may treat some files as optional.
class HttpNotFound : public Error {
public:
  using Error::Error;
};

class HttpClient {
public:
  explicit HttpClient(HttpOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // base + "/" + name (a trailing '/' of base is not doubled), with every
  // byte of name outside RFC 3986's unreserved set and '/' percent-encoded.
  static std::string join(const std::string& base, const std::string& name);

  RemoteFileInfo head(const std::string& url);

  // A whole (small) file. Refuses bodies larger than max_bytes.
  std::string get(const std::string& url, uint64_t max_bytes = 64ull << 20);
  // Like get(), but a 404/410 returns nullopt instead of throwing.
  std::optional<std::string> get_optional(const std::string& url, uint64_t max_bytes = 64ull << 20);

  // Exactly bytes [offset, offset + n) of the file into dest, by a range
  // request. The reply must be 206 with a Content-Range naming exactly this
  // range (and, when total_bytes is given, this total) and a body of exactly
  // n bytes; anything else is a failed attempt. When if_match is not empty it
  // is sent as If-Match, so a file that changed on the mirror since setup
  // answers 412 — reported as "changed on the mirror", never retried; so is
  // a Content-Range naming another total than total_bytes. A range past the
  // end of the file (416, or a reply that names a shorter file) and a server
  // that ignores ranges (200) fail at once too. n == 0 sends nothing.
  void get_range(const std::string& url, uint64_t offset, uint64_t n, uint8_t* dest,
                 const std::string& if_match = "", std::optional<uint64_t> total_bytes = std::nullopt);

  // Totals since construction (for --stats): body bytes received (error
  // pages included), requests sent (each attempt counts), attempts that
  // failed and were retried. Safe to read from another thread.
  uint64_t bytes_received() const;
  uint64_t requests() const;
  uint64_t retries() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// libcurl's global init, done once before any thread makes a client.
void http_global_init();

}  // namespace deltafin
