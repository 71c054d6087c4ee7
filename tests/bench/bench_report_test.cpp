// bench's output without a model: the text report's statements, the JSON's
// shape, the pictures (well-formed, titled, with axes and legends, also at
// 1,000 tokens) and the drive-scaling chart from bench JSON files.
#include "bench/bench_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/xml_check.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {
namespace {

using test::has_text;
using test::xml_problem;

// A run of `tokens` decode steps on two drives, every figure made up.
RunResult made_up_run(int config, bool warmup, size_t tokens, double tok_s, double mb_s) {
  RunResult r;
  r.config = config;
  r.warmup = warmup;
  PromptRun p;
  StepStats pre;
  pre.prefill = true;
  pre.ms = 20;
  p.steps.push_back(pre);
  for (size_t i = 0; i < tokens; ++i) {
    StepStats s;
    s.ms = 10 + static_cast<double>(i % 7);
    s.wait_ms = static_cast<double>(i % 5);
    s.demanded = 8;
    s.hits = i % 9;
    s.hits = std::min<uint64_t>(s.hits, 8);
    s.prefetch_hits = s.hits / 2;
    p.steps.push_back(s);
    p.tokens.push_back(static_cast<uint32_t>(i % 50));
  }
  r.prompts.push_back(p);
  r.bin_s = 0.01;
  r.drive_bins = {std::vector<uint64_t>(300, 1000000), std::vector<uint64_t>(300, 500000)};
  DriveWindow w;
  w.mb_s = {mb_s / 2, mb_s / 2};
  w.busy = {0.5, 0.4};
  w.bins_active = {1, 1};
  r.metrics = run_metrics(r.prompts, w, 3.0, 1 << 20);
  r.metrics[0].value = tok_s;
  return r;
}

BenchResult made_up_bench(size_t configs, size_t tokens = 8, size_t drives_mb_s = 200) {
  BenchResult b;
  b.options.runs = 2;
  b.options.warmup = 1;
  b.options.max_new = static_cast<int64_t>(tokens) + 1;
  b.prompts = {{"builtin-4", {1, 2, 3, 4}}};
  b.configs.push_back({"A", "the command's options", "/store", nullptr});
  if (configs == 2) b.configs.push_back({"B", "--lookahead off", "/store", nullptr});
  b.describe_a = "spine bf16; experts streamed";
  b.describe_b = "spine bf16; experts streamed, lookahead off";
  b.drives = 2;
  for (int round = 0; round < 3; ++round)
    for (size_t c = 0; c < configs; ++c) {
      RunResult r = made_up_run(static_cast<int>(c), round == 0, tokens, 10.0 + round + 5.0 * c,
                                static_cast<double>(drives_mb_s) + round);
      r.index = b.runs.size();
      b.runs.push_back(r);
    }
  check_tokens(b);
  return b;
}

TEST(BenchReport, PerLayerComputeAndWaitingGetALineEachNotTableRows) {
  BenchResult b = made_up_bench(1);
  for (RunResult& r : b.runs) {
    r.metrics.push_back({"layer3_compute_ms", "ms/decode token", 2.5});
    r.metrics.push_back({"layer3_wait_ms", "ms/decode token", 7.25});
  }
  const std::string t = format_bench_report(b);
  EXPECT_NE(t.find("layer 3   compute        2.5 ms, waiting       7.25 ms"), std::string::npos) << t;
  EXPECT_EQ(t.find("layer3_compute_ms"), std::string::npos) << "per-layer rows stay out of the main table\n" << t;
}

TEST(BenchReport, TextSaysWhatWasMeasuredAndHow) {
  const std::string t = format_bench_report(made_up_bench(1));
  for (const char* s : {"1 prompt (4 tokens)", "2 measured runs", "1 warm-up run", "excluded", "warm runs",
                        "every run's tokens equal the first run's", "decode_tokens_per_s", "median", "MAD",
                        "drive0_busy", "per MoE layer, expert compute vs waiting for reads (A, medians, per decode token): not measured"})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
  // Measured A runs have 11 and 12 tokens/s: median 11.5.
  EXPECT_NE(t.find("11.5"), std::string::npos) << t;
}

TEST(BenchReport, TextOfAnABBenchHasBothAndTheRatios) {
  const std::string t = format_bench_report(made_up_bench(2));
  for (const char* s : {"A: the command's options", "B: --lookahead off;", "alternate A B", "B / A, pair by pair"})
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
}

TEST(BenchReport, AWrongRunIsReportedWithPromptAndPosition) {
  BenchResult b = made_up_bench(1);
  b.runs[2].prompts[0].tokens[3] = 49;  // the second measured run
  check_tokens(b);
  const std::string t = format_bench_report(b);
  EXPECT_NE(t.find("CORRECTNESS FAILURE: run 3 (A), prompt builtin-4: generated token 3 is 49, the first run's is 3"),
            std::string::npos)
      << t;
  const auto j = nlohmann::json::parse(bench_json(b, "deltafin bench"));
  EXPECT_FALSE(j["tokens_equal"].get<bool>());
  EXPECT_EQ(j["mismatches"][0]["position"], 3);
  EXPECT_EQ(j["summary"]["A"]["decode_tokens_per_s"]["n"], 1);  // not averaged
}

TEST(BenchReport, JsonHoldsConfigurationRunsAndSummaries) {
  const auto j = nlohmann::json::parse(bench_json(made_up_bench(2), "deltafin bench --store s --vs '--lookahead off'"));
  EXPECT_EQ(j["command"], "deltafin bench --store s --vs '--lookahead off'");
  ASSERT_EQ(j["configs"].size(), 2u);
  EXPECT_EQ(j["configs"][1]["options"], "--lookahead off");
  EXPECT_EQ(j["drives"], 2);
  EXPECT_EQ(j["runs"], 2);
  EXPECT_EQ(j["warmup"], 1);
  EXPECT_TRUE(j["warmup_excluded"].get<bool>());
  EXPECT_FALSE(j["cold"].get<bool>());
  EXPECT_TRUE(j["tokens_equal"].get<bool>());
  EXPECT_EQ(j["prompts"][0]["ids"].size(), 4u);
  for (const char* c : {"A", "B", "B/A"})
    for (const char* k : {"median", "min", "max", "mad", "n", "unit"})
      EXPECT_TRUE(j["summary"][c]["decode_tokens_per_s"].contains(k)) << c << " " << k;
  EXPECT_DOUBLE_EQ(j["summary"]["A"]["decode_tokens_per_s"]["median"].get<double>(), 11.5);
  EXPECT_DOUBLE_EQ(j["summary"]["B"]["decode_tokens_per_s"]["median"].get<double>(), 16.5);
  ASSERT_EQ(j["runs_detail"].size(), 6u);
  const auto& r = j["runs_detail"][0];
  EXPECT_TRUE(r["warmup"].get<bool>());
  EXPECT_EQ(r["config"], "A");
  EXPECT_TRUE(r["metrics"].contains("drives_total_mb_s"));
  EXPECT_TRUE(r["metrics"]["lookahead_recall"].is_null());  // NaN: no figure
  EXPECT_EQ(r["prompts"][0]["steps"].size(), 9u);
  EXPECT_EQ(r["drive_bins"].size(), 2u);
}

TEST(BenchReport, PicturesAreWellFormedWithTitlesAxesAndLegends) {
  test::TempDir tmp;
  for (size_t tokens : {8u, 1000u}) {
    const std::string prefix = tmp.file(cat("b", tokens));
    std::vector<std::string> notes;
    const auto written = write_bench_svgs(made_up_bench(1, tokens), prefix, &notes);
    ASSERT_EQ(written.size(), 3u);
    EXPECT_TRUE(notes.empty());
    const std::string drives = read_text_file(prefix + "-drives.svg"), steps = read_text_file(prefix + "-steps.svg"),
                      hits = read_text_file(prefix + "-hits.svg");
    for (const std::string* s : {&drives, &steps, &hits}) {
      EXPECT_EQ(xml_problem(*s), "");
      EXPECT_LT(s->size(), 400000u) << "a 1,000-token picture stays small";
    }
    for (const char* t : {"Read bandwidth per drive", "time since the run started (s)", "read bandwidth (MB/s)", "drive 0",
                          "drive 1", "all drives"})
      EXPECT_TRUE(has_text(drives, t)) << t;
    for (const char* t : {"compute", "waiting for reads", "time (ms)", "decoded token"}) EXPECT_TRUE(has_text(steps, t)) << t;
    for (const char* t : {"Expert cache hit rate per decoded token", "hit rate (%)", "hits"})
      EXPECT_TRUE(has_text(hits, t)) << t;
  }
  // The drives picture covers the run: 300 bins of 10 ms = 3 s, 1.5 MB a bin = 150 MB/s in all.
  const TraceSummary t = drive_summary(made_up_run(0, false, 4, 1, 1));
  EXPECT_NEAR(t.plot_bin_s, 0.03, 1e-12);
  ASSERT_EQ(t.drive_mb_s.size(), 2u);
  EXPECT_NEAR(t.drive_mb_s[0][0] + t.drive_mb_s[1][0], 150, 1e-9);
}

TEST(BenchReport, ScalingChartFromBenchJsonFiles) {
  test::TempDir tmp;
  std::vector<ScalingPoint> points;
  for (int drives : {1, 2, 4}) {
    BenchResult b = made_up_bench(1, 8, 100 * drives);
    b.drives = static_cast<size_t>(drives);
    const std::string path = tmp.file(cat("d", drives, ".json"));
    write_file_atomic(path, bench_json(b, "deltafin bench"));
    points.push_back(read_scaling_point(path));
  }
  // Measured A runs: 100 N + 1 and 100 N + 2 MB/s.
  EXPECT_DOUBLE_EQ(points[2].drives, 4);
  EXPECT_DOUBLE_EQ(points[2].median_mb_s, 401.5);
  EXPECT_DOUBLE_EQ(points[2].min_mb_s, 401);
  EXPECT_DOUBLE_EQ(points[2].max_mb_s, 402);
  const svg::LineChart c = scaling_chart({points[2], points[0], points[1]});
  ASSERT_EQ(c.series.size(), 3u);
  // The ideal line: N x the one-drive bench's 101.5 MB/s.
  EXPECT_DOUBLE_EQ(c.series[0].points.back().y, 101.5 * 5);
  EXPECT_DOUBLE_EQ(c.series[1].points[0].x, 1);  // sorted by drives
  const std::string s = c.svg();
  EXPECT_EQ(xml_problem(s), "");
  for (const char* t : {"Read bandwidth vs number of drives", "drives", "aggregate read bandwidth (MB/s)",
                        "ideal: N x one drive", "measured (median)", "min / max of runs"})
    EXPECT_TRUE(has_text(s, t)) << t;
  test::write_bytes(tmp.file("bad.json"), "{\"drives\": 2}");
  EXPECT_FAILS_WITH(read_scaling_point(tmp.file("bad.json")), "bad.json", "drives_total_mb_s");
  test::write_bytes(tmp.file("bad.json"), "not json");
  EXPECT_FAILS_WITH(read_scaling_point(tmp.file("bad.json")), "bad.json", "not JSON");
  EXPECT_FAILS_WITH(scaling_chart({}), "at least one");
}

}  // namespace
}  // namespace deltafin
