// The mirror's replies judged without a server (remote/mirror_reply.h): the
// header lines and body pieces HttpClient's callbacks hand over, the verdicts
// on them, a HEAD reply's size, and the SHA256SUMS list. http_client_test.cpp
// runs the same code against nginx and a faulty proxy; these name each rule.
#include "remote/mirror_reply.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_support.h"

namespace deltafin {
namespace {

using mirror::BodySink;
using mirror::ContentRange;
using mirror::Cut;
using mirror::Reply;
using mirror::Request;
using mirror::Verdict;

Request range_request(uint64_t offset, uint64_t n, std::optional<uint64_t> total = std::nullopt) {
  Request r;
  r.url = "http://m/f";
  r.ranged = true;
  r.offset = offset;
  r.n = n;
  r.total = total;
  return r;
}

Request get_request(uint64_t max_bytes) {
  Request r;
  r.url = "http://m/f";
  r.max_bytes = max_bytes;
  return r;
}

// A reply from its header lines as curl hands them over (CR LF kept).
Reply reply_of(std::initializer_list<const char*> lines) {
  Reply reply;
  for (const char* line : lines) reply.header_line(std::string(line) + "\r\n");
  return reply;
}

TEST(MirrorContentRange, ParsesRangesTotalsAndStars) {
  std::optional<ContentRange> r = mirror::parse_content_range("bytes 100-199/1000");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 100u);
  EXPECT_EQ(r->last, 199u);
  EXPECT_EQ(r->total, 1000u);
  r = mirror::parse_content_range("Bytes 0-0/*");  // the unit is case-insensitive
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 0u);
  EXPECT_EQ(r->last, 0u);
  EXPECT_FALSE(r->total);
  r = mirror::parse_content_range("bytes */4096");  // as sent with 416
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->first);
  EXPECT_FALSE(r->last);
  EXPECT_EQ(r->total, 4096u);
  r = mirror::parse_content_range("bytes 0-1/18446744073709551615");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->total, UINT64_MAX);
}

TEST(MirrorContentRange, RefusesAnythingElse) {
  for (const char* bad : {"", "bytes", "bytes ", "items 0-1/2", "bytes 0-1", "bytes 0-1/", "bytes -1/2", "bytes 1-/2",
                          "bytes 0 - 1/2", "bytes +0-1/2", "bytes 0-1/2 ", "bytes 0-1/-2",
                          "bytes 0-1/18446744073709551616", "bytes 0x0-1/2", "bytes=0-1/2"})
    EXPECT_FALSE(mirror::parse_content_range(bad)) << '"' << bad << '"';
}

TEST(MirrorReply, HeaderLinesGiveStatusReasonAndTrimmedLowercaseFields) {
  const Reply r = reply_of({"HTTP/1.1 206 Partial Content", "Content-Range:  bytes 0-9/10 \t", "ETag: \"abc\"",
                            "X-Twice: 1", "x-twice: 2", "no colon here", ""});
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.reason, "Partial Content");
  EXPECT_EQ(r.status_text(), "HTTP 206 Partial Content");
  EXPECT_EQ(r.header("content-range"), "bytes 0-9/10");
  EXPECT_EQ(r.header("etag"), "\"abc\"");
  EXPECT_EQ(r.header("x-twice"), "2");  // the last of repeats
  EXPECT_EQ(r.header("missing"), "");
  EXPECT_EQ(r.headers.size(), 3u);
  EXPECT_EQ(reply_of({"HTTP/2 200"}).status_text(), "HTTP 200");
  EXPECT_EQ(reply_of({"HTTP/1.1 abc"}).status, 0);  // not a status: judged as unexpected
}

TEST(MirrorReply, AStatusLineForgetsTheRedirectBeforeIt) {
  const Reply r = reply_of({"HTTP/1.1 302 Found", "Location: http://cdn/f", "ETag: \"old\"", "",
                            "HTTP/1.1 200 OK", "Content-Length: 5"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("location"), "");
  EXPECT_EQ(r.header("etag"), "");
  EXPECT_EQ(r.header("content-length"), "5");
}

TEST(MirrorBody, ARangeBodyIsWrittenUpToNAndNeverPast) {
  const Request req = range_request(10, 4);
  std::vector<uint8_t> dest(4 + 1, 0xEE);  // one guard byte after the n asked for
  Reply r = reply_of({"HTTP/1.1 206 Partial Content"});
  const BodySink sink{nullptr, dest.data()};
  EXPECT_EQ(mirror::accept_body(r, req, sink, "ab", 2), 2u);
  EXPECT_EQ(mirror::accept_body(r, req, sink, "cd", 2), 2u);
  EXPECT_EQ(std::string(dest.begin(), dest.begin() + 4), "abcd");
  EXPECT_EQ(mirror::accept_body(r, req, sink, "e", 1), 0u);  // one byte too many: stopped
  EXPECT_EQ(r.cut, Cut::TooLong);
  EXPECT_EQ(dest[4], 0xEE);
}

TEST(MirrorBody, AWholeFileForARangeIsStoppedAtOnce) {
  const Request req = range_request(0, 4);
  uint8_t dest[4] = {};
  Reply r = reply_of({"HTTP/1.1 200 OK"});
  EXPECT_EQ(mirror::accept_body(r, req, BodySink{nullptr, dest}, "ab", 2), 0u);
  EXPECT_EQ(r.cut, Cut::NotPartial);
  EXPECT_EQ(dest[0], 0);
}

TEST(MirrorBody, AnErrorPageIsDroppedUpToItsLimit) {
  const Request req = range_request(0, 4);
  uint8_t dest[4] = {};
  Reply r = reply_of({"HTTP/1.1 500 Internal Server Error"});
  const std::string page(mirror::kMaxErrorBody, 'x');
  EXPECT_EQ(mirror::accept_body(r, req, BodySink{nullptr, dest}, page.data(), page.size()), page.size());
  EXPECT_EQ(r.cut, Cut::None);
  EXPECT_EQ(dest[0], 0);
  EXPECT_EQ(mirror::accept_body(r, req, BodySink{nullptr, dest}, "x", 1), 0u);
  EXPECT_EQ(r.cut, Cut::ErrorBodyTooLong);
}

TEST(MirrorBody, AGetBodyIsKeptUpToMaxBytes) {
  const Request req = get_request(5);
  std::string text;
  Reply r = reply_of({"HTTP/1.1 200 OK"});
  EXPECT_EQ(mirror::accept_body(r, req, BodySink{&text, nullptr}, "hello", 5), 5u);
  EXPECT_EQ(text, "hello");
  EXPECT_EQ(mirror::accept_body(r, req, BodySink{&text, nullptr}, "!", 1), 0u);
  EXPECT_EQ(r.cut, Cut::TooLong);
  EXPECT_EQ(text, "hello");
  EXPECT_EQ(mirror::judge_reply(req, r).verdict, Verdict::Fatal);
  EXPECT_NE(mirror::judge_reply(req, r).failure.find("larger than the 5 bytes allowed"), std::string::npos);
}

// The verdict on a 206 reply with this Content-Range and body length.
mirror::Outcome judge_206(const Request& req, const char* content_range, uint64_t body_bytes) {
  Reply r = reply_of({"HTTP/1.1 206 Partial Content"});
  if (content_range) r.header_line(std::string("Content-Range: ") + content_range);
  r.body_bytes = body_bytes;
  return mirror::judge_reply(req, r);
}

TEST(MirrorJudge, ARangeReplyMustNameExactlyTheRangeAndTotal) {
  const Request req = range_request(100, 100, 1000);
  EXPECT_EQ(judge_206(req, "bytes 100-199/1000", 100).verdict, Verdict::Ok);
  EXPECT_EQ(judge_206(range_request(100, 100), "bytes 100-199/*", 100).verdict, Verdict::Ok);
  // Transient: another range, a short body, no or a malformed Content-Range.
  EXPECT_EQ(judge_206(req, "bytes 101-200/1000", 100).verdict, Verdict::Retry);
  EXPECT_EQ(judge_206(req, "bytes 100-199/1000", 99).verdict, Verdict::Retry);
  EXPECT_EQ(judge_206(req, nullptr, 100).verdict, Verdict::Retry);
  EXPECT_EQ(judge_206(req, "bytes 100-199", 100).verdict, Verdict::Retry);
  // For good: another file size, or a range past the end of the file.
  const mirror::Outcome changed = judge_206(req, "bytes 100-199/2000", 100);
  EXPECT_EQ(changed.verdict, Verdict::Fatal);
  EXPECT_NE(changed.failure.find("changed on the mirror"), std::string::npos) << changed.failure;
  const mirror::Outcome past = judge_206(range_request(100, 100), "bytes 100-149/150", 50);
  EXPECT_EQ(past.verdict, Verdict::Fatal);
  EXPECT_NE(past.failure.find("beyond the end of the file (150 bytes)"), std::string::npos) << past.failure;
}

// Found by fuzz_mirror: with the file's size recorded, a reply naming no size
// ("bytes a-b/*") was accepted, though get_range promises a Content-Range
// naming that total; a replaced file of another size would pass the range
// check. It is retried (and the run fails, naming both) like another range.
TEST(MirrorJudge, ARecordedSizeMustBeNamed) {
  const mirror::Outcome o = judge_206(range_request(0, 8, 1000), "bytes 0-7/*", 8);
  EXPECT_EQ(o.verdict, Verdict::Retry);
  EXPECT_EQ(o.failure, "the reply's Content-Range is \"bytes 0-7/*\", not \"bytes 0-7/1000\"");
  EXPECT_EQ(judge_206(range_request(0, 8), "bytes 0-7/*", 8).verdict, Verdict::Ok);  // no size recorded
}

TEST(MirrorJudge, StatusesGiveTheirVerdicts) {
  const Request ranged = range_request(0, 10), get = get_request(100);
  auto verdict = [](const Request& req, const char* status_line) {
    return mirror::judge_reply(req, reply_of({status_line})).verdict;
  };
  EXPECT_EQ(verdict(get, "HTTP/1.1 200 OK"), Verdict::Ok);
  EXPECT_EQ(verdict(get, "HTTP/1.1 206 Partial Content"), Verdict::Fatal);  // a part of a file asked whole
  EXPECT_EQ(verdict(ranged, "HTTP/1.1 200 OK"), Verdict::Fatal);            // ranges ignored
  EXPECT_EQ(verdict(get, "HTTP/1.1 404 Not Found"), Verdict::NotFound);
  EXPECT_EQ(verdict(ranged, "HTTP/1.1 410 Gone"), Verdict::NotFound);
  EXPECT_EQ(verdict(ranged, "HTTP/1.1 416 Range Not Satisfiable"), Verdict::Fatal);
  EXPECT_EQ(verdict(get, "HTTP/1.1 412 Precondition Failed"), Verdict::Fatal);
  for (const char* passing : {"HTTP/1.1 408 Request Timeout", "HTTP/1.1 429 Too Many Requests", "HTTP/1.1 500 x",
                              "HTTP/1.1 503 Service Unavailable"})
    EXPECT_EQ(verdict(ranged, passing), Verdict::Retry) << passing;
  EXPECT_EQ(verdict(get, "HTTP/1.1 403 Forbidden"), Verdict::Fatal);
  EXPECT_EQ(verdict(get, "garbage"), Verdict::Fatal);  // no status line at all
  Request if_match = ranged;
  if_match.if_match = "\"e1\"";
  const mirror::Outcome changed = mirror::judge_reply(if_match, reply_of({"HTTP/1.1 412 Precondition Failed"}));
  EXPECT_NE(changed.failure.find("changed on the mirror since setup"), std::string::npos) << changed.failure;
  const mirror::Outcome outside =
      mirror::judge_reply(ranged, reply_of({"HTTP/1.1 416 Range Not Satisfiable", "Content-Range: bytes */7"}));
  EXPECT_NE(outside.failure.find("the file has 7 bytes"), std::string::npos) << outside.failure;
}

TEST(MirrorHead, SizeEtagAndRangesFromTheReply) {
  Request head;
  head.method = "HEAD";
  head.url = "http://m/f";
  const RemoteFileInfo info =
      mirror::head_info(head, reply_of({"HTTP/1.1 200 OK", "Content-Length: 12345", "ETag: W/\"x\"",
                                        "Accept-Ranges: Bytes"}));
  EXPECT_EQ(info.bytes, 12345u);
  EXPECT_EQ(info.etag, "W/\"x\"");
  EXPECT_TRUE(info.accepts_ranges);
  EXPECT_FALSE(mirror::head_info(head, reply_of({"HTTP/1.1 200 OK", "Content-Length: 1", "Accept-Ranges: none"}))
                   .accepts_ranges);
  EXPECT_FAILS_WITH(mirror::head_info(head, reply_of({"HTTP/1.1 200 OK"})), "HEAD http://m/f", "no Content-Length");
  EXPECT_FAILS_WITH(mirror::head_info(head, reply_of({"HTTP/1.1 200 OK", "Content-Length: -1"})),
                    "Content-Length \"-1\"", "size is unknown");
}

TEST(Sha256Sums, ParsesSha256sumOutput) {
  const std::string a(64, 'a'), b = std::string(63, 'B') + "C";
  const auto got = parse_sha256sums(a + "  config.json\r\n\n" + b + " *dir/model.safetensors\n", "SUMS");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, "config.json");
  EXPECT_EQ(got[0].second, a);
  EXPECT_EQ(got[1].first, "dir/model.safetensors");
  EXPECT_EQ(got[1].second, std::string(63, 'b') + "c");  // lowercased
  EXPECT_TRUE(parse_sha256sums("", "SUMS").empty());
  EXPECT_FAILS_WITH(parse_sha256sums(a + "  x\n" + std::string(63, 'a') + "  y\n", "SUMS"), "SUMS", "line 2");
  EXPECT_FAILS_WITH(parse_sha256sums(a + " x\n", "SUMS"), "line 1");
  EXPECT_FAILS_WITH(parse_sha256sums(std::string(63, 'a') + "g  x\n", "SUMS"), "line 1");
  EXPECT_FAILS_WITH(parse_sha256sums(a + "  \n", "SUMS"), "line 1");  // no name
}

TEST(Sha256Sums, ANameListedTwiceIsRefused) {
  // Two digests for one file: which one holds? (The map setup keeps would
  // have silently taken the last.)
  const std::string a(64, 'a'), b(64, 'b');
  EXPECT_FAILS_WITH(parse_sha256sums(a + "  config.json\n" + b + " *config.json\n", "SUMS"), "SUMS", "line 2",
                    "\"config.json\" is listed twice (first on line 1)");
}

// Found by fuzz_mirror: "\r\r\n" ended a line, one CR was taken as the line
// end's and the other stayed in the name, which then matched no file, so its
// digest checked nothing (and the list did not read back as written).
TEST(Sha256Sums, AControlByteInANameIsRefused) {
  const std::string a(64, 'a');
  EXPECT_FAILS_WITH(parse_sha256sums(a + "  config.json\r\r\n", "SUMS"), "SUMS", "line 1", "control byte 0x0d");
  EXPECT_FAILS_WITH(parse_sha256sums(a + "  x\n" + a + "  a\tb\n", "SUMS"), "line 2", "control byte 0x09");
  EXPECT_EQ(parse_sha256sums(a + "  na me.json\r\n", "SUMS")[0].first, "na me.json");  // a space is a name's
}

}  // namespace
}  // namespace deltafin
