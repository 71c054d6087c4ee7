#include "bench/trace_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "bench/xml_check.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {
namespace {

using test::has_text;
using test::xml_problem;

// One "read" or "hit" line as the monitor writes it.
std::string record(const char* t, int layer, int expert, int drive, bool prefetch, bool promoted, double enqueue_s,
                   double end_s, uint64_t bytes, bool ok = true, bool cancelled = false) {
  return cat("{\"t\":\"", t, "\",\"layer\":", layer, ",\"expert\":", expert, ",\"drive\":", drive,
             ",\"drives\":[", drive < 0 ? "" : std::to_string(drive), "],\"prefetch\":", prefetch ? "true" : "false",
             ",\"promoted\":", promoted ? "true" : "false", ",\"ok\":", ok ? "true" : "false",
             ",\"cancelled\":", cancelled ? "true" : "false", ",\"enqueue_s\":", enqueue_s,
             ",\"start_s\":", enqueue_s, ",\"end_s\":", end_s, ",\"bytes\":", bytes, "}\n");
}

// Element by element within 1e-9: MB/s come from divisions by the bin width.
void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << "at " << i;
}

std::string bins_line(int drive, const std::string& bytes) {
  return cat("{\"t\":\"drive_bins\",\"drive\":", drive, ",\"bin_s\":0.01,\"bytes\":[", bytes, "]}\n");
}

// Two drives over 110 ms. Drive 0: 1 MB in each of the first ten 10 ms bins.
// Drive 1: nothing for 50 ms, then 2 MB a bin for five bins, then 4 MB.
std::string small_trace() {
  return record("read", 0, 3, 0, false, false, 0.001, 0.011, 1000000) +
         record("read", 0, 4, 1, true, false, 0.002, 0.052, 2000000) +
         record("read", 1, 4, 1, true, true, 0.010, 0.030, 2000000) + record("hit", 1, 5, -1, false, false, 0.02, 0.02, 0) +
         record("read", 2, 1, 0, true, false, 0.03, 0.04, 1000000, true, true) +  // cancelled
         record("read", 2, 2, 1, false, false, 0.03, 0.09, 1000000, false) +      // failed
         bins_line(0, "1000000,1000000,1000000,1000000,1000000,1000000,1000000,1000000,1000000,1000000") +
         bins_line(1, "0,0,0,0,0,2000000,2000000,2000000,2000000,2000000,4000000");
}

TEST(TracePlot, RebinsToMegabytesPerSecond) {
  const std::vector<uint64_t> bytes = {1000000, 2000000, 0, 500000, 3000000};
  // 10 ms bins: MB / 0.01 s.
  expect_near(rebin_drive_bins(bytes, 0.01, 0.01), {100, 200, 0, 50, 300});
  // 20 ms: (1 + 2) MB, (0 + 0.5) MB, 3 MB (a last bin short of data) per 0.02 s.
  const std::vector<double> r = rebin_drive_bins(bytes, 0.01, 0.02);
  expect_near(r, {150, 25, 150});
  expect_near(rebin_drive_bins(bytes, 0.01, 0.1), {65});  // 6.5 MB / 0.1 s
  EXPECT_TRUE(rebin_drive_bins({}, 0.01, 0.1).empty());
  EXPECT_FAILS_WITH(rebin_drive_bins(bytes, 0.01, 0.015), "10 ms", "15 ms", "whole multiple");
  EXPECT_FAILS_WITH(rebin_drive_bins(bytes, 0.01, 0.005), "whole multiple");
  EXPECT_FAILS_WITH(rebin_drive_bins(bytes, 0.01, 1e300), "whole multiple");
}

TEST(TracePlot, AutoBinsShowAboutAHundredBinsUpTo100Ms) {
  EXPECT_DOUBLE_EQ(auto_bin_s(11, 0.01), 0.01);      // 110 ms: the trace's own bins
  EXPECT_DOUBLE_EQ(auto_bin_s(520, 0.01), 0.05);     // 5.2 s: 50 ms, 104 bins
  EXPECT_DOUBLE_EQ(auto_bin_s(1000, 0.01), 0.1);     // 10 s: 100 ms
  EXPECT_DOUBLE_EQ(auto_bin_s(360000, 0.01), 0.1);   // an hour: still 100 ms
  EXPECT_DOUBLE_EQ(auto_bin_s(5000, 0.05), 0.1);     // other trace bins: multiples of them
}

TEST(TracePlot, ReadsASmallTraceIntoHandComputedNumbers) {
  test::TempDir tmp;
  const std::string path = tmp.file("t.jsonl");
  test::write_bytes(path, small_trace());
  // Without --bin-ms an 11-bin (110 ms) run keeps its 10 ms bins.
  EXPECT_DOUBLE_EQ(read_trace(path).plot_bin_s, 0.01);
  const TraceSummary t = read_trace(path, 100);
  EXPECT_DOUBLE_EQ(t.plot_bin_s, 0.1);
  EXPECT_EQ(t.lines, 8u);
  EXPECT_DOUBLE_EQ(t.bin_s, 0.01);
  EXPECT_EQ(t.reads, 5u);
  EXPECT_EQ(t.hits, 1u);
  EXPECT_EQ(t.cancelled, 1u);
  EXPECT_EQ(t.failed, 1u);
  EXPECT_EQ(t.demand_reads, 1u);
  EXPECT_EQ(t.prefetch_reads, 2u);
  EXPECT_EQ(t.read_bytes, 5000000u);
  EXPECT_EQ(t.drive_bytes, 24000000u);
  // 100 ms bins: drive 0 has 10 MB in bin 0 (100 MB/s) and is padded to drive 1's
  // two bins; drive 1 has 10 MB then 4 MB (100 and 40 MB/s).
  ASSERT_EQ(t.drive_mb_s.size(), 2u);
  expect_near(t.drive_mb_s[0], {100, 0});
  expect_near(t.drive_mb_s[1], {100, 40});
  // 50 ms bins: drive 0 5 MB twice (100 MB/s); drive 1 0, 10 MB (200), 4 MB (80).
  const TraceSummary t50 = read_trace(path, 50);
  expect_near(t50.drive_mb_s[0], {100, 100, 0});
  expect_near(t50.drive_mb_s[1], {0, 200, 80});

  // The total is drawn with the drives, at the bins' middles.
  const svg::LineChart c = drives_chart(t);
  ASSERT_EQ(c.series.size(), 3u);
  EXPECT_EQ(c.series[2].name, "all drives");
  ASSERT_EQ(c.series[2].points.size(), 2u);
  EXPECT_DOUBLE_EQ(c.series[2].points[0].x, 0.05);
  EXPECT_NEAR(c.series[2].points[0].y, 200, 1e-9);
  EXPECT_NEAR(c.series[2].points[1].y, 40, 1e-9);

  // Latency (end - enqueue) per kind, at the completion time; demand reads
  // last, drawn on top.
  ASSERT_EQ(t.latency_ms.size(), 3u);
  EXPECT_EQ(t.latency_ms[0].first, "prefetches");
  EXPECT_NEAR(t.latency_ms[0].second.points().at(0).y, 50, 1e-9);
  EXPECT_EQ(t.latency_ms[1].first, "prefetches, then demanded");
  EXPECT_NEAR(t.latency_ms[1].second.points().at(0).y, 20, 1e-9);
  EXPECT_EQ(t.latency_ms[2].first, "demand reads");
  const auto demand = t.latency_ms[2].second.points();
  ASSERT_EQ(demand.size(), 1u);
  EXPECT_DOUBLE_EQ(demand[0].x, 0.011);
  EXPECT_NEAR(demand[0].y, 10, 1e-9);

  const TraceSummary by_drive = read_trace(path, 100, ReadsBy::Drive);
  ASSERT_EQ(by_drive.latency_ms.size(), 2u);
  EXPECT_EQ(by_drive.latency_ms[0].first, "drive 0");
  EXPECT_EQ(by_drive.latency_ms[0].second.count(), 1u);
  EXPECT_EQ(by_drive.latency_ms[1].second.count(), 2u);
}

TEST(TracePlot, AMalformedLineIsAnErrorNamingItsLine) {
  test::TempDir tmp;
  const std::string path = tmp.file("bad.jsonl");
  const std::string good = record("hit", 1, 5, -1, false, false, 0.02, 0.02, 0);
  test::write_bytes(path, good + good + "{\"t\":\"read\", \"layer\": 1,\n" + good);
  EXPECT_FAILS_WITH(read_trace(path), path + " line 3", "not JSON");
  std::string no_end = record("read", 0, 3, 0, false, false, 0.001, 0.011, 1000000);
  no_end.replace(no_end.find(",\"end_s\":0.011"), 14, "");
  test::write_bytes(path, good + no_end);
  EXPECT_FAILS_WITH(read_trace(path), path + " line 2", "missing \"end_s\"");
  test::write_bytes(path, good + "{\"t\":\"mystery\"}\n");
  EXPECT_FAILS_WITH(read_trace(path), "line 2", "unknown record type");
  test::write_bytes(path, good + "[1,2]\n");
  EXPECT_FAILS_WITH(read_trace(path), "line 2", "not a JSON object");
  test::write_bytes(path, bins_line(0, "1,-2"));
  EXPECT_FAILS_WITH(read_trace(path), "line 1", "bytes[1]");
  test::write_bytes(path, bins_line(0, "1") + bins_line(0, "2"));
  EXPECT_FAILS_WITH(read_trace(path), "line 2", "second drive_bins line for drive 0");
  test::write_bytes(path, bins_line(1, "1"));
  EXPECT_FAILS_WITH(read_trace(path), "no drive_bins line for drive 0");
  test::write_bytes(path, bins_line(0, "1"));
  EXPECT_FAILS_WITH(read_trace(path, 15), path, "15 ms", "whole multiple");
  test::write_bytes(path, "");
  EXPECT_FAILS_WITH(read_trace(path), "empty");
  EXPECT_FAILS_WITH(read_trace(tmp.file("missing.jsonl")), "missing.jsonl");
}

TEST(TracePlot, ReducerKeepsExtremesInBoundedMemory) {
  PointReducer r(10, 8);
  for (int i = 0; i < 5; ++i) r.add(i * 0.01, i);
  EXPECT_EQ(r.points().size(), 5u);  // under the cap: the points as they are
  for (int i = 5; i < 100000; ++i) r.add(i * 0.01, i == 70000 ? -7 : i % 50);
  EXPECT_EQ(r.count(), 100000u);
  const std::vector<svg::Point> p = r.points();
  EXPECT_LE(p.size(), 16u);  // two per bucket
  double lo = 1e9, hi = -1e9;
  for (const svg::Point& q : p) lo = std::min(lo, q.y), hi = std::max(hi, q.y);
  EXPECT_EQ(lo, -7);
  EXPECT_EQ(hi, 49);
  // The buckets cover the whole time range: the last point's bucket is last.
  EXPECT_GT(p.back().x, 999.99 * 0.5);
}

std::string small_stats() {
  return R"({"config": "x", "steps": [
    {"prefill": true, "ms": 200.0, "wait_ms": 150.0, "demanded": 40, "hits": 0, "prefetch_hits": 0},
    {"prefill": false, "ms": 10.0, "wait_ms": 4.0, "demanded": 8, "hits": 6, "prefetch_hits": 2},
    {"prefill": false, "ms": 12.0, "wait_ms": 12.5, "demanded": 0, "hits": 0, "prefetch_hits": 0},
    {"prefill": false, "ms": 8.0, "wait_ms": 0.0, "demanded": 4, "hits": 4, "prefetch_hits": 1}]})";
}

TEST(TracePlot, StatsBecomeStackedTimesAndHitRates) {
  test::TempDir tmp;
  const std::string path = tmp.file("s.json");
  test::write_bytes(path, small_stats());
  const StepSeries s = read_stats(path);
  EXPECT_EQ(s.prefill_passes, 1u);
  EXPECT_EQ(s.ms.size(), 3u);
  const svg::StackedBarChart bars = steps_chart(s);
  // compute = ms - wait_ms; waiting never exceeds the step.
  EXPECT_EQ(bars.bars, (std::vector<std::vector<double>>{{6, 4}, {0, 12}, {8, 0}}));
  EXPECT_DOUBLE_EQ(bars.first_x, 1);
  const svg::LineChart hits = hits_chart(s);
  ASSERT_EQ(hits.series.size(), 2u);
  EXPECT_DOUBLE_EQ(hits.series[0].points[0].y, 75);
  EXPECT_TRUE(std::isnan(hits.series[0].points[1].y));  // no expert demanded: a gap
  EXPECT_DOUBLE_EQ(hits.series[0].points[2].y, 100);
  EXPECT_DOUBLE_EQ(hits.series[1].points[0].y, 25);

  test::write_bytes(path, R"({"steps": [{"prefill": false, "ms": 1}]})");
  EXPECT_FAILS_WITH(read_stats(path), path, "steps[0]", "wait_ms");
  test::write_bytes(path, R"({"steps": )");
  EXPECT_FAILS_WITH(read_stats(path), path, "not JSON");
  test::write_bytes(path, R"([1])");
  EXPECT_FAILS_WITH(read_stats(path), path, "steps");
}

TEST(TracePlot, WritesFourWellFormedPictures) {
  test::TempDir tmp;
  test::write_bytes(tmp.file("t.jsonl"), small_trace());
  test::write_bytes(tmp.file("s.json"), small_stats());
  TracePlotOptions o;
  o.trace = tmp.file("t.jsonl");
  o.stats = tmp.file("s.json");
  o.prefix = tmp.file("run");
  o.bin_ms = 10;
  const std::vector<std::string> written = write_trace_plots(o);
  ASSERT_EQ(written.size(), 4u);
  const std::pair<const char*, std::vector<std::string>> expect[] = {
      {"-drives.svg", {"Read bandwidth per drive", "time since the run started (s)", "read bandwidth (MB/s)", "drive 0", "drive 1", "all drives"}},
      {"-reads.svg", {"Expert read latency: demand reads vs prefetches", "latency, queued to done (ms)", "demand reads (1)", "prefetches (1)"}},
      {"-steps.svg", {"Time per decoded token: compute vs waiting for reads", "decoded token", "time (ms)", "compute", "waiting for reads"}},
      {"-hits.svg", {"Expert cache hit rate per decoded token", "hit rate (%)", "hits", "hits on prefetched experts"}}};
  for (const auto& [suffix, texts] : expect) {
    const std::string svg = read_text_file(o.prefix + suffix);
    SCOPED_TRACE(suffix);
    EXPECT_EQ(xml_problem(svg), "");
    for (const std::string& text : texts) EXPECT_TRUE(has_text(svg, text)) << text;
  }
}

TEST(TracePlot, ATraceNeverClosedStillGetsItsReadsPicture) {
  test::TempDir tmp;
  const std::string all = small_trace();
  test::write_bytes(tmp.file("t.jsonl"), all.substr(0, all.find("{\"t\":\"drive_bins\"")));
  TracePlotOptions o;
  o.trace = tmp.file("t.jsonl");
  o.prefix = tmp.file("run");
  std::vector<std::string> notes;
  EXPECT_EQ(write_trace_plots(o, &notes), std::vector<std::string>{tmp.file("run-reads.svg")});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("no drive_bins lines"), std::string::npos) << notes[0];
}

TEST(TracePlot, CommandLine) {
  test::TempDir tmp;
  test::write_bytes(tmp.file("t.jsonl"), small_trace());
  test::write_bytes(tmp.file("s.json"), small_stats());
  std::string out;
  const std::string bin = test::deltafin_binary();
  ASSERT_EQ(test::run_command(bin + " trace-plot " + tmp.file("t.jsonl") + " --svg " + tmp.file("p") + " --stats " +
                                  tmp.file("s.json") + " --bin-ms 20 --reads-by drive",
                              &out),
            0)
      << out;
  for (const char* f : {"p-drives.svg", "p-reads.svg", "p-steps.svg", "p-hits.svg"}) {
    EXPECT_TRUE(file_exists(tmp.file(f))) << f;
    EXPECT_NE(out.find("wrote " + tmp.file(f)), std::string::npos) << out;
  }
  EXPECT_TRUE(has_text(read_text_file(tmp.file("p-reads.svg")), "drive 1 (2)"));
  test::write_bytes(tmp.file("bad.jsonl"), small_trace() + "oops\n");
  EXPECT_EQ(test::run_command(bin + " trace-plot " + tmp.file("bad.jsonl") + " --svg " + tmp.file("q"), &out), 1);
  EXPECT_NE(out.find("bad.jsonl line 9"), std::string::npos) << out;
  EXPECT_FALSE(file_exists(tmp.file("q-reads.svg")));  // nothing written on an error
}

}  // namespace
}  // namespace deltafin
