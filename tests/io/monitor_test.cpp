#include "io/monitor.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"

namespace deltafin {
namespace {

TEST(Monitor, BinsAndCounters) {
  Monitor m(2, 0.010);
  EXPECT_DOUBLE_EQ(m.bin_seconds(), 0.010);
  m.drive_busy(0, 0.001, true);
  m.chunk_done(0, 0.002, 100);
  m.chunk_done(0, 0.009, 50);
  m.chunk_done(0, 0.025, 7);
  m.drive_busy(0, 0.030, false);
  m.chunk_done(1, 0.0155, 1000);
  auto bins = m.drive_bins();
  ASSERT_EQ(bins.size(), 2u);
  ASSERT_EQ(bins[0].size(), 3u);
  EXPECT_EQ(bins[0][0], 150u);
  EXPECT_EQ(bins[0][1], 0u);
  EXPECT_EQ(bins[0][2], 7u);
  ASSERT_EQ(bins[1].size(), 2u);
  EXPECT_EQ(bins[1][1], 1000u);
  auto c = m.drive_counters();
  EXPECT_EQ(c[0].bytes, 157u);
  EXPECT_EQ(c[0].reads, 3u);
  EXPECT_NEAR(c[0].busy_s, 0.029, 1e-12);
  EXPECT_EQ(c[1].bytes, 1000u);
  EXPECT_EQ(c[1].busy_s, 0.0);
  // A drive busy now counts its busy time so far.
  m.drive_busy(1, m.now(), true);
  EXPECT_GE(m.drive_counters()[1].busy_s, 0.0);
}

TEST(Monitor, TraceWritesOneJsonObjectPerReadOrHit) {
  test::TempDir tmp;
  const std::string path = tmp.file("t.jsonl");
  Monitor m(2);
  m.cache_hit(1, 2);  // no trace open: not written, no harm
  m.open_trace(path);
  ReadRecord ok;
  ok.layer = 3;
  ok.expert = 17;
  ok.drive = 1;
  ok.drives = {0, 1};
  ok.prefetch = true;
  ok.promoted = true;
  ok.enqueue_s = 0.5;
  ok.start_s = 0.75;
  ok.end_s = 1.25;
  ok.bytes = 17547264;
  m.read_done(ok);
  ReadRecord bad = ok;
  bad.expert = 18;
  bad.ok = false;
  bad.error = "layer 3 expert 18: drive 0 (/d0) /d0/x: \"quoted\"\n\xff; no replica left";
  m.read_done(bad);
  m.cache_hit(4, 5);
  m.chunk_done(1, 0.005, 100);   // bin 0 of drive 1
  m.chunk_done(1, 0.025, 7);     // bin 2
  m.close_trace();
  m.close_trace();  // a second close is a no-op
  // The trace ends with one line of 10 ms bins per drive.
  auto bins = test::read_trace(path, true);
  ASSERT_EQ(bins.size(), 2u);
  EXPECT_EQ(bins[0]["drive"], 0);
  EXPECT_EQ(bins[0]["bytes"], nlohmann::json::array());
  EXPECT_EQ(bins[1]["drive"], 1);
  EXPECT_EQ(bins[1]["bin_s"], 0.010);
  EXPECT_EQ(bins[1]["bytes"], nlohmann::json::array({100, 0, 7}));
  auto lines = test::read_trace(path);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& j : lines)
    for (const char* k : {"t", "layer", "expert", "drive", "drives", "prefetch", "promoted", "ok", "cancelled",
                          "enqueue_s", "start_s", "end_s", "bytes"})
      EXPECT_TRUE(j.contains(k)) << k << " in " << j.dump();
  EXPECT_EQ(lines[0]["t"], "read");
  EXPECT_EQ(lines[0]["layer"], 3);
  EXPECT_EQ(lines[0]["expert"], 17);
  EXPECT_EQ(lines[0]["drive"], 1);
  EXPECT_EQ(lines[0]["drives"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(lines[0]["prefetch"], true);
  EXPECT_EQ(lines[0]["promoted"], true);
  EXPECT_EQ(lines[0]["ok"], true);
  EXPECT_EQ(lines[0]["cancelled"], false);
  EXPECT_EQ(lines[0]["enqueue_s"], 0.5);
  EXPECT_EQ(lines[0]["start_s"], 0.75);
  EXPECT_EQ(lines[0]["end_s"], 1.25);
  EXPECT_EQ(lines[0]["bytes"], 17547264);
  EXPECT_FALSE(lines[0].contains("error"));
  EXPECT_EQ(lines[1]["ok"], false);
  EXPECT_NE(lines[1]["error"].get<std::string>().find("\"quoted\""), std::string::npos);
  EXPECT_EQ(lines[2]["t"], "hit");
  EXPECT_EQ(lines[2]["layer"], 4);
  EXPECT_EQ(lines[2]["expert"], 5);
  EXPECT_EQ(lines[2]["drive"], -1);
  EXPECT_EQ(lines[2]["bytes"], 0);
}

TEST(Monitor, TraceIsStreamedNotKept) {
  test::TempDir tmp;
  const std::string path = tmp.file("t.jsonl");
  Monitor m(1);
  m.open_trace(path);
  ReadRecord r;
  r.bytes = 1;
  // Enough lines to pass the write buffer several times: they reach the file
  // before close.
  for (int i = 0; i < 8000; ++i) {
    r.expert = i;
    m.read_done(r);
  }
  EXPECT_GE(std::filesystem::file_size(path), 1u << 20);  // ~1.4 MB of lines, one buffer's worth written
  m.close_trace();
  EXPECT_EQ(test::read_trace(path).size(), 8000u);
  EXPECT_EQ(test::read_trace(path, true).size(), 1u);  // the one drive's bins line
}

TEST(Monitor, OpenTraceFailureNamesThePath) {
  Monitor m(1);
  EXPECT_FAILS_WITH(m.open_trace("/nonexistent-dir/t.jsonl"), "/nonexistent-dir/t.jsonl");
}

}  // namespace
}  // namespace deltafin
