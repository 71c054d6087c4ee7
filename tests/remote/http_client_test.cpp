// HttpClient against a real nginx serving a temporary directory, directly and
// through the fault-injecting proxy (remote/mirror_server.h).
#include "remote/http_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "remote/mirror_server.h"
#include "support/test_support.h"

namespace deltafin {
namespace {

using test::Fault;
using test::FaultProxy;

// n bytes from an LCG: the same for the same seed, no structure nginx or a
// proxy could be kind to.
std::string pseudo_random_bytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed;
  for (char& c : s) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    c = static_cast<char>(x >> 56);
  }
  return s;
}

HttpOptions fast_options() {
  HttpOptions o;
  o.attempts = 3;
  o.backoff_s = 0.01;
  o.backoff_max_s = 0.05;
  o.connect_timeout_s = 5;
  return o;
}

FaultProxy::Rule first(size_t k, Fault f) {
  return [=](size_t n, const std::string&) { return n < k ? f : Fault::None; };
}
FaultProxy::Rule always(Fault f) {
  return [=](size_t, const std::string&) { return f; };
}

// A loopback port with nothing listening on it (free a moment ago).
int dead_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

constexpr size_t kBigBytes = (3u << 20) + 7;  // 3 MiB and an odd tail
const std::string kSmall = "small text file\nsecond line\n";
const std::string kOddName = "sub dir/a+b%c.bin";  // needs percent-encoding

// Every test gets a fresh nginx (about 20 ms) on a fresh directory, so access
// logs and counters start from zero.
class HttpMirror : public ::testing::Test {
protected:
  void SetUp() override {
    if (!test::nginx_available()) {
      if (::deltafin::test::under_ci()) FAIL() << "nginx (/usr/sbin/nginx) is missing under CI: apt-get install nginx";
      GTEST_SKIP() << "\n*** SKIPPED: nginx (/usr/sbin/nginx) is missing (scripts/install-deps.sh installs it)"
                   << "\n*** the HTTP client has NOT been checked against a real mirror\n";
    }
    big_ = pseudo_random_bytes(kBigBytes, 42);
    test::write_bytes(root_.file("big.bin"), big_);
    test::write_bytes(root_.file("small.txt"), kSmall);
    std::filesystem::create_directories(root_.file("sub dir"));
    test::write_bytes(root_.file(kOddName), "odd name\n");
    std::filesystem::create_directories(root_.file("docs"));
    test::write_bytes(root_.file("docs/index.html"), "index of docs\n");
    nginx_ = std::make_unique<test::NginxMirror>(root_.path());
  }

  std::string url(const std::string& name) const { return HttpClient::join(nginx_->url(), name); }
  std::string slice(uint64_t offset, uint64_t n) const { return big_.substr(offset, n); }

  // get_range into a buffer of exactly n bytes (ASan sees any overflow).
  static std::string fetch(HttpClient& client, const std::string& url, uint64_t offset, uint64_t n,
                           const std::string& if_match = "", std::optional<uint64_t> total = std::nullopt) {
    std::vector<uint8_t> dest(n);
    client.get_range(url, offset, n, dest.data(), if_match, total);
    return std::string(dest.begin(), dest.end());
  }

  test::TempDir root_;
  std::string big_;
  std::unique_ptr<test::NginxMirror> nginx_;
};

// The same mirror behind a FaultProxy.
class HttpFaults : public HttpMirror {
protected:
  FaultProxy& proxy(FaultProxy::Rule rule) {
    proxy_ = std::make_unique<FaultProxy>(nginx_->port(), std::move(rule));
    return *proxy_;
  }
  std::string purl(const std::string& name) const { return HttpClient::join(proxy_->url(), name); }

  std::unique_ptr<FaultProxy> proxy_;
};

// ---------------------------------------------------------------- join

TEST(HttpJoin, PercentEncodesAllButUnreservedAndSlash) {
  EXPECT_EQ(HttpClient::join("http://m/repo", "model-00001.safetensors"), "http://m/repo/model-00001.safetensors");
  EXPECT_EQ(HttpClient::join("http://m/repo/", "a b/c+d%e?f#g"), "http://m/repo/a%20b/c%2Bd%25e%3Ff%23g");
  EXPECT_EQ(HttpClient::join("http://m", "A-z_0.9~"), "http://m/A-z_0.9~");
  EXPECT_EQ(HttpClient::join("http://m", "\xC3\xA9"), "http://m/%C3%A9");  // UTF-8 bytes one by one
}

// ---------------------------------------------------------------- nginx, no faults

TEST_F(HttpMirror, HeadGivesSizeEtagAndRangeSupport) {
  HttpClient client(fast_options());
  const RemoteFileInfo info = client.head(url("big.bin"));
  EXPECT_EQ(info.bytes, kBigBytes);
  EXPECT_FALSE(info.etag.empty());
  EXPECT_EQ(info.etag.front(), '"') << info.etag;  // quotes kept, ready for If-Match
  EXPECT_TRUE(info.accepts_ranges);
  EXPECT_EQ(client.bytes_received(), 0u);
  EXPECT_THROW(client.head(url("missing.bin")), HttpNotFound);
}

TEST_F(HttpMirror, GetSmallFile) {
  HttpClient client(fast_options());
  EXPECT_EQ(client.get(url("small.txt")), kSmall);
  EXPECT_EQ(client.get(url(kOddName)), "odd name\n");  // "sub%20dir/a%2Bb%25c.bin" decoded by nginx
  EXPECT_EQ(client.requests(), 2u);
  EXPECT_EQ(client.retries(), 0u);
  EXPECT_EQ(client.bytes_received(), kSmall.size() + 9);
}

TEST_F(HttpMirror, MissingFileIsNotFoundAndNotRetried) {
  HttpClient client(fast_options());
  EXPECT_EQ(client.get_optional(url("missing.json")), std::nullopt);
  const std::string u = url("missing.json");
  try {
    client.get(u);
    ADD_FAILURE() << "no HttpNotFound";
  } catch (const HttpNotFound& e) {
    EXPECT_NE(std::string(e.what()).find(u), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("404"), std::string::npos) << e.what();
  }
  EXPECT_EQ(client.requests(), 2u);
  EXPECT_EQ(client.retries(), 0u);
  EXPECT_EQ(client.get_optional(url("small.txt")), kSmall);
}

TEST_F(HttpMirror, GetRefusesABodyOverMaxBytes) {
  HttpClient client(fast_options());
  EXPECT_FAILS_WITH(client.get(url("big.bin"), 1000), url("big.bin"), "larger than the 1000 bytes allowed");
  EXPECT_EQ(client.retries(), 0u);
  EXPECT_EQ(client.get(url("small.txt"), kSmall.size()), kSmall);  // exactly max is fine
}

TEST_F(HttpMirror, FollowsARedirect) {
  // nginx answers a directory without its slash with a 301 to "docs/".
  HttpClient client(fast_options());
  EXPECT_EQ(client.get(url("docs")), "index of docs\n");
}

TEST_F(HttpMirror, GetRangeReturnsExactlyTheAskedBytes) {
  HttpClient client(fast_options());
  const std::string u = url("big.bin");
  struct Case {
    uint64_t offset, n;
  };
  const Case cases[] = {{0, 1}, {kBigBytes - 1, 1}, {1234567, 100000}, {0, kBigBytes}, {kBigBytes - 3000, 3000}};
  uint64_t sum = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(cat("bytes ", c.offset, "+", c.n));
    EXPECT_EQ(fetch(client, u, c.offset, c.n, "", kBigBytes), slice(c.offset, c.n));
    sum += c.n;
  }
  EXPECT_EQ(client.bytes_received(), sum);
  EXPECT_EQ(client.requests(), std::size(cases));
  EXPECT_EQ(client.retries(), 0u);
  ASSERT_TRUE(nginx_->wait_logged(std::size(cases)));
  EXPECT_EQ(nginx_->requests_logged(), std::size(cases));
  EXPECT_EQ(nginx_->body_bytes_logged(), sum);
  client.get_range(u, 5, 0, nullptr);  // nothing asked, nothing sent
  EXPECT_EQ(client.requests(), std::size(cases));
}

TEST_F(HttpMirror, IfMatchWithTheRightEtagWorksAndAWrongOneSaysTheFileChanged) {
  HttpClient client(fast_options());
  const std::string u = url("big.bin");
  const std::string etag = client.head(u).etag;
  EXPECT_EQ(fetch(client, u, 777, 4096, etag, kBigBytes), slice(777, 4096));
  EXPECT_FAILS_WITH(fetch(client, u, 777, 4096, "\"0-0\""), u, "bytes 777-4872", "changed on the mirror", "412");
  EXPECT_EQ(client.retries(), 0u);
}

TEST_F(HttpMirror, ARangeOutsideTheFileFailsWithoutRetrying) {
  HttpClient client(fast_options());
  const std::string u = url("big.bin");
  // Wholly past the end: nginx answers 416.
  EXPECT_FAILS_WITH(fetch(client, u, kBigBytes, 10), u, cat("bytes ", kBigBytes, "-", kBigBytes + 9), "416",
                    "not in the file", cat(kBigBytes, " bytes"));
  // Partly past the end: nginx sends what there is; the Content-Range says so.
  EXPECT_FAILS_WITH(fetch(client, u, kBigBytes - 5, 10), u, "beyond the end of the file");
  EXPECT_EQ(client.requests(), 2u);
  EXPECT_EQ(client.retries(), 0u);
}

TEST_F(HttpMirror, AnotherTotalThanTheRecordedSizeSaysTheFileChanged) {
  HttpClient client(fast_options());
  const std::string u = url("big.bin");
  EXPECT_FAILS_WITH(fetch(client, u, 0, 100, "", kBigBytes + 1), u, "bytes 0-99", "changed on the mirror",
                    cat(kBigBytes, " bytes, not ", kBigBytes + 1));
  EXPECT_EQ(client.retries(), 0u);
}

// ---------------------------------------------------------------- through the fault proxy

TEST_F(HttpFaults, FaithfulProxyKeepsOneConnectionAlive) {
  FaultProxy& p = proxy(always(Fault::None));
  HttpClient client(fast_options());
  EXPECT_EQ(client.head(purl("big.bin")).bytes, kBigBytes);
  for (uint64_t off : {0ull, 1000ull, 2000000ull}) EXPECT_EQ(fetch(client, purl("big.bin"), off, 5000), slice(off, 5000));
  EXPECT_EQ(client.get(purl("small.txt")), kSmall);
  EXPECT_EQ(client.get_optional(purl("missing")), std::nullopt);
  EXPECT_EQ(p.requests(), 6u);
  EXPECT_EQ(p.connections(), 1u);
}

TEST_F(HttpFaults, Status500TwiceThenSuccess) {
  FaultProxy& p = proxy(first(2, Fault::Status500));
  HttpClient client(fast_options());
  EXPECT_EQ(fetch(client, purl("big.bin"), 1000, 5000), slice(1000, 5000));
  EXPECT_EQ(client.retries(), 2u);
  EXPECT_EQ(client.requests(), 3u);
  EXPECT_EQ(p.requests(), 3u);
  EXPECT_EQ(p.connections(), 1u);  // a 500 does not cost the connection
}

TEST_F(HttpFaults, Status500EveryTimeGivesUpNamingUrlRangeAndAttempts) {
  FaultProxy& p = proxy(always(Fault::Status500));
  HttpClient client(fast_options());
  const std::string u = purl("big.bin");
  EXPECT_FAILS_WITH(fetch(client, u, 100, 100), u, "bytes 100-199", "HTTP 500 Internal Server Error",
                    "after 3 attempts");
  EXPECT_EQ(p.requests(), 3u);
  EXPECT_EQ(client.retries(), 2u);
  EXPECT_FAILS_WITH(client.get(purl("small.txt")), purl("small.txt"), "HTTP 500", "after 3 attempts");
}

TEST_F(HttpFaults, DroppedConnectionThenSuccess) {
  proxy(first(1, Fault::Drop));
  HttpClient client(fast_options());
  EXPECT_EQ(fetch(client, purl("big.bin"), 0, 65536), slice(0, 65536));
  EXPECT_EQ(client.retries(), 1u);
}

TEST_F(HttpFaults, TruncatedBodyThenSuccess) {
  proxy(first(1, Fault::Truncate));
  HttpClient client(fast_options());
  EXPECT_EQ(fetch(client, purl("big.bin"), 10, 1 << 20), slice(10, 1 << 20));
  EXPECT_EQ(client.retries(), 1u);
}

TEST_F(HttpFaults, TruncatedEveryTimeFails) {
  proxy(always(Fault::Truncate));
  HttpClient client(fast_options());
  const std::string u = purl("big.bin");
  EXPECT_FAILS_WITH(fetch(client, u, 10, 1000), u, "bytes 10-1009", "after 3 attempts");
  EXPECT_FAILS_WITH(client.get(purl("small.txt")), purl("small.txt"), "after 3 attempts");
}

TEST_F(HttpFaults, ShortBodyIsRetried) {
  proxy(first(1, Fault::WrongLength));
  HttpClient client(fast_options());
  EXPECT_EQ(fetch(client, purl("big.bin"), 500, 2000), slice(500, 2000));
  EXPECT_EQ(client.retries(), 1u);
  proxy_->set_rule(always(Fault::WrongLength));
  EXPECT_FAILS_WITH(fetch(client, purl("big.bin"), 500, 2000), "bytes 500-2499", "1999 bytes, not 2000",
                    "after 3 attempts");
}

TEST_F(HttpFaults, LongBodyNeverOverflowsTheDestination) {
  proxy(always(Fault::LongBody));
  HttpClient client(fast_options());
  // A guard after the n bytes: the extra byte must not land there (and ASan
  // builds would see a write past a buffer of exactly n).
  const uint64_t n = 3000;
  std::vector<uint8_t> dest(n + 64, 0xAB);
  EXPECT_FAILS_WITH(client.get_range(purl("big.bin"), 0, n, dest.data()), "bytes 0-2999",
                    "longer than the 3000 bytes asked for", "after 3 attempts");
  for (size_t i = n; i < dest.size(); ++i) ASSERT_EQ(dest[i], 0xAB) << "byte " << i << " past the range was written";
  proxy_->set_rule(first(1, Fault::LongBody));
  EXPECT_EQ(fetch(client, purl("big.bin"), 0, n), slice(0, n));
}

TEST_F(HttpFaults, AnotherRangeThanAskedIsRetried) {
  proxy(first(1, Fault::ShiftedRange));
  HttpClient client(fast_options());
  EXPECT_EQ(fetch(client, purl("big.bin"), 100, 100, "", kBigBytes), slice(100, 100));
  EXPECT_EQ(client.retries(), 1u);
  proxy_->set_rule(always(Fault::ShiftedRange));
  EXPECT_FAILS_WITH(fetch(client, purl("big.bin"), 100, 100), "bytes 100-199", "Content-Range",
                    cat("bytes 101-200/", kBigBytes), "after 3 attempts");
}

TEST_F(HttpFaults, StalledReplyIsAbandonedAndRetried) {
  FaultProxy& p = proxy(first(1, Fault::Stall));
  p.stall_s = 4;  // well past the 1 s low-speed window; the proxy's destructor ends it early
  HttpOptions o = fast_options();
  o.low_speed_time_s = 1;
  HttpClient client(o);
  EXPECT_EQ(fetch(client, purl("big.bin"), 42, 4242), slice(42, 4242));
  EXPECT_EQ(client.retries(), 1u);
  EXPECT_EQ(p.requests(), 2u);
}

TEST_F(HttpFaults, ServerDownGivesUpNamingTheUrl) {
  HttpClient client(fast_options());
  const std::string u = HttpClient::join(cat("http://127.0.0.1:", dead_port()), "big.bin");
  EXPECT_FAILS_WITH(fetch(client, u, 0, 10), u, "bytes 0-9", "after 3 attempts");
  EXPECT_FAILS_WITH(client.head(u), u, "after 3 attempts");
  EXPECT_EQ(client.requests(), 6u);
}

TEST_F(HttpFaults, AServerIgnoringRangesIsAClearErrorNotRetried) {
  FaultProxy& p = proxy(always(Fault::IgnoreRange));
  HttpClient client(fast_options());
  std::vector<uint8_t> dest(100 + 64, 0xAB);
  EXPECT_FAILS_WITH(client.get_range(purl("big.bin"), 0, 100, dest.data()), purl("big.bin"), "bytes 0-99",
                    "ignored the byte range", "HTTP 200 instead of 206");
  EXPECT_EQ(p.requests(), 1u);
  EXPECT_EQ(client.retries(), 0u);
  for (size_t i = 0; i < dest.size(); ++i) ASSERT_EQ(dest[i], 0xAB) << "byte " << i << " written from a 200 reply";
  EXPECT_LT(client.bytes_received(), kBigBytes);  // stopped at the first chunk, not the whole file
}

TEST_F(HttpFaults, NotFoundThroughTheProxyIsNotRetried) {
  FaultProxy& p = proxy(always(Fault::None));
  HttpClient client(fast_options());
  EXPECT_EQ(client.get_optional(purl("missing.bin")), std::nullopt);
  EXPECT_THROW(client.get_range(purl("missing.bin"), 0, 1, std::vector<uint8_t>(1).data()), HttpNotFound);
  EXPECT_EQ(p.requests(), 2u);
}

// ---------------------------------------------------------------- the test mirrors themselves

// WrongBytes passes HTTP's checks (only a hash can catch it): the fetcher's
// tests rely on exactly one byte, at flipped_byte(n), being XORed with 0xFF.
TEST_F(HttpFaults, WrongBytesFlipsExactlyOneByte) {
  proxy(always(Fault::WrongBytes));
  HttpClient client(fast_options());
  const uint64_t offset = 4000, n = 10001;
  const std::string got = fetch(client, purl("big.bin"), offset, n);
  std::string want = slice(offset, n);
  ASSERT_EQ(got.size(), want.size());
  size_t differing = 0;
  for (size_t i = 0; i < n; ++i) differing += got[i] != want[i];
  EXPECT_EQ(differing, 1u);
  want[test::flipped_byte(n)] ^= static_cast<char>(0xFF);
  EXPECT_EQ(got, want);
  EXPECT_EQ(client.retries(), 0u);
}

TEST_F(HttpMirror, AccessLogCountsRequestsAndBodyBytes) {
  HttpClient client(fast_options());
  client.get(url("small.txt"));
  fetch(client, url("big.bin"), 0, 1000);
  client.get_optional(url("missing"));
  ASSERT_TRUE(nginx_->wait_logged(3));
  EXPECT_EQ(nginx_->requests_logged(), 3u);
  // The 404 page's body counts too.
  EXPECT_EQ(nginx_->body_bytes_logged(), client.bytes_received());
  EXPECT_GE(nginx_->body_bytes_logged(), kSmall.size() + 1000);
}

// Ctrl-C must not wait out a stalled mirror: the cancel predicate stops the
// transfer in progress and the retries after it.
TEST_F(HttpFaults, CancelStopsAStalledTransferAtOnce) {
  FaultProxy& p = proxy(always(Fault::Stall));
  p.stall_s = 6;
  std::atomic<bool> cancel{false};
  HttpOptions o = fast_options();
  o.low_speed_time_s = 20;  // without the predicate this would wait 20 s per attempt
  o.cancelled = [&] { return cancel.load(); };
  HttpClient client(o);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FAILS_WITH(fetch(client, purl("big.bin"), 0, 100), purl("big.bin"), "interrupted");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.join();
  EXPECT_LT(took, 3.0);
  EXPECT_EQ(p.requests(), 1u);  // not retried
}

}  // namespace
}  // namespace deltafin
