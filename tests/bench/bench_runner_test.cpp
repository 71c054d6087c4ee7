// bench's measurement without a model: the statistics on hand-computed
// inputs, the token-equality check on injected run results, the summaries
// (warm-ups and wrong runs left out, B/A pair by pair) and the per-run
// metrics of hand-made steps.
#include "bench/bench_runner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/test_support.h"
#include "util/error.h"

namespace deltafin {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(BenchStats, MedianMinMaxAndMadOfHandComputedInputs) {
  Spread s = spread_of({3, 1, 2});
  EXPECT_EQ(s.n, 3u);
  EXPECT_DOUBLE_EQ(s.median, 2);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mad, 1);  // |3-2|, |1-2|, |2-2| = 1, 1, 0 -> 1
  // Even count: median (2 + 3) / 2 = 2.5; deviations 1.5, 0.5, 0.5, 7.5 -> (0.5 + 1.5) / 2 = 1.
  s = spread_of({10, 2, 1, 3});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.mad, 1);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 10);
  // One value: no spread. NaN (a figure a run did not have) is left out.
  s = spread_of({7, kNaN});
  EXPECT_EQ(s.n, 1u);
  EXPECT_DOUBLE_EQ(s.median, 7);
  EXPECT_DOUBLE_EQ(s.mad, 0);
  EXPECT_EQ(spread_of({}).n, 0u);
  EXPECT_EQ(spread_of({kNaN}).n, 0u);
}

TEST(BenchTokens, FirstDifferenceNamesPromptPositionAndIds) {
  const std::vector<std::vector<uint32_t>> ref = {{1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_FALSE(first_difference(ref, ref).has_value());
  auto m = first_difference(ref, {{1, 2, 3}, {4, 5, 9, 7}});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->prompt, 1u);
  EXPECT_EQ(m->position, 2u);
  EXPECT_EQ(m->expected, 6);
  EXPECT_EQ(m->got, 9);
  m = first_difference(ref, {{1, 2}, {4, 5, 6, 7}});  // a shorter run: the missing token is -1
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->prompt, 0u);
  EXPECT_EQ(m->position, 2u);
  EXPECT_EQ(m->got, -1);
  m = first_difference(ref, {{1, 2, 3}});  // a missing prompt
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->prompt, 1u);
  EXPECT_EQ(m->position, 0u);
}

RunResult fake_run(int config, bool warmup, std::vector<uint32_t> tokens, double tok_s) {
  RunResult r;
  r.config = config;
  r.warmup = warmup;
  PromptRun p;
  p.tokens = std::move(tokens);
  r.prompts.push_back(p);
  r.metrics = {{"decode_tokens_per_s", "tokens/s", tok_s}, {"lookahead_recall", "", kNaN}};
  return r;
}

BenchResult fake_bench(std::vector<RunResult> runs, size_t configs) {
  BenchResult b;
  for (size_t i = 0; i < runs.size(); ++i) runs[i].index = i;
  b.runs = std::move(runs);
  b.configs.resize(configs);
  b.prompts = {{"p0", {1, 2}}};
  return b;
}

TEST(BenchTokens, ARunWithDifferentTokensIsRejectedAndNotAveraged) {
  BenchResult b = fake_bench({fake_run(0, true, {5, 6, 7}, 100), fake_run(0, false, {5, 6, 7}, 10),
                              fake_run(0, false, {5, 6, 8}, 1000), fake_run(0, false, {5, 6, 7}, 20)},
                             1);
  check_tokens(b);
  EXPECT_FALSE(b.ok());
  ASSERT_EQ(b.mismatches.size(), 1u);
  EXPECT_EQ(b.mismatches[0].run, 2u);
  EXPECT_EQ(b.mismatches[0].prompt, 0u);
  EXPECT_EQ(b.mismatches[0].position, 2u);
  EXPECT_EQ(b.mismatches[0].expected, 7);
  EXPECT_EQ(b.mismatches[0].got, 8);
  EXPECT_FALSE(b.runs[2].correct);
  EXPECT_TRUE(b.runs[1].correct);
  // The warm-up (100) and the wrong run (1000) are out: median of 10 and 20.
  const auto s = summarize(b, 0);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "decode_tokens_per_s");
  EXPECT_EQ(s[0].spread.n, 2u);
  EXPECT_DOUBLE_EQ(s[0].spread.median, 15);
  EXPECT_DOUBLE_EQ(s[0].spread.max, 20);
  EXPECT_EQ(s[1].spread.n, 0u);  // no run had a lookahead recall
}

TEST(BenchTokens, BMustProduceTheSameTokensAsA) {
  BenchResult b = fake_bench({fake_run(0, false, {1, 2}, 10), fake_run(1, false, {1, 3}, 10)}, 2);
  check_tokens(b);
  ASSERT_EQ(b.mismatches.size(), 1u);
  EXPECT_EQ(b.mismatches[0].config, 1);
  EXPECT_EQ(b.mismatches[0].position, 1u);
  EXPECT_EQ(summarize_ratios(b)[0].spread.n, 0u);  // the pair with a wrong run is left out
}

TEST(BenchStats, RatiosArePairByPairBOverA) {
  // A B A B A B: pairs (10, 5), (20, 30), (0, 4) -> 0.5, 1.5 and none (A is 0).
  BenchResult b = fake_bench({fake_run(0, false, {1}, 10), fake_run(1, false, {1}, 5), fake_run(0, false, {1}, 20),
                              fake_run(1, false, {1}, 30), fake_run(0, false, {1}, 0), fake_run(1, false, {1}, 4)},
                             2);
  check_tokens(b);
  EXPECT_TRUE(b.ok());
  const auto r = summarize_ratios(b);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].spread.n, 2u);
  EXPECT_DOUBLE_EQ(r[0].spread.median, 1.0);
  EXPECT_DOUBLE_EQ(r[0].spread.min, 0.5);
  EXPECT_DOUBLE_EQ(r[0].spread.max, 1.5);
  EXPECT_DOUBLE_EQ(r[0].spread.mad, 0.5);
  EXPECT_EQ(r[0].unit, "B / A");
}

double metric(const std::vector<Metric>& m, const std::string& name) {
  for (const Metric& x : m)
    if (x.name == name) return x.value;
  ADD_FAILURE() << "no metric " << name;
  return kNaN;
}

TEST(BenchStats, RunMetricsOfHandMadeSteps) {
  PromptRun p;
  p.tokens = {1, 2, 3};
  p.gen.ttft_seconds = 0.05;
  p.gen.prompt_tokens = 8;
  p.gen.prefill_seconds = 0.04;
  p.prefill.bytes_read = 300;
  p.prefill.unique_bytes = 200;
  StepStats pre;
  pre.prefill = true;
  pre.ms = 40;
  pre.bytes_read = 300;
  StepStats a, b;
  a.ms = 10, a.wait_ms = 4, a.bytes_read = 1000, a.demanded = 8, a.hits = 6, a.pilot_hits = 3, a.pilot_actual = 4;
  b.ms = 30, b.wait_ms = 31, b.bytes_read = 3000, b.demanded = 8, b.hits = 2, b.pilot_hits = 1, b.pilot_actual = 4;
  // Layer 0 has no routed experts; layer 1: expert phases of 6 and 10 ms with 2 and 12 ms
  // of waiting (capped at the phase); layer 2: 4 and 0 ms (the second step never reached it).
  a.layer_expert_ms = {0, 6, 4}, a.layer_wait_ms = {0, 2, 1};
  b.layer_expert_ms = {0, 10, 0}, b.layer_wait_ms = {0, 12, 0};
  p.steps = {pre, a, b};
  DriveWindow w;
  w.mb_s = {100, 50};
  w.busy = {0.5, 0.25};
  w.bins_active = {0.75, 0.5};
  const auto m = run_metrics({p}, w, 2.0, 12345);
  EXPECT_DOUBLE_EQ(metric(m, "decode_tokens_per_s"), 50);     // 2 steps in 40 ms
  EXPECT_DOUBLE_EQ(metric(m, "ttft_ms"), 50);
  EXPECT_DOUBLE_EQ(metric(m, "prefill_tokens_per_s"), 200);   // 8 positions in 40 ms
  EXPECT_DOUBLE_EQ(metric(m, "bytes_read_per_token"), 2000);  // the prefill's 300 are not decode bytes
  EXPECT_DOUBLE_EQ(metric(m, "prefill_amplification"), 1.5);
  EXPECT_DOUBLE_EQ(metric(m, "hit_rate"), 0.5);               // 8 of 16
  EXPECT_DOUBLE_EQ(metric(m, "lookahead_recall"), 0.5);       // 4 of 8
  // Waiting is capped at the step (31 > 30): compute (6 + 0) / 2, waiting (4 + 30) / 2.
  EXPECT_DOUBLE_EQ(metric(m, "compute_ms_per_token"), 3);
  EXPECT_DOUBLE_EQ(metric(m, "wait_ms_per_token"), 17);
  EXPECT_DOUBLE_EQ(metric(m, "wait_fraction"), 34.0 / 40);
  EXPECT_DOUBLE_EQ(metric(m, "generated_tokens"), 3);
  EXPECT_DOUBLE_EQ(metric(m, "peak_rss_bytes"), 12345);
  EXPECT_DOUBLE_EQ(metric(m, "drive1_mb_s"), 50);
  EXPECT_DOUBLE_EQ(metric(m, "drive0_busy"), 0.5);
  EXPECT_DOUBLE_EQ(metric(m, "drive1_bins_active"), 0.5);
  EXPECT_DOUBLE_EQ(metric(m, "drives_total_mb_s"), 150);
  // Per layer, per decode token: layer 1 compute ((6-2) + (10-10)) / 2, waiting (2 + 10) / 2.
  EXPECT_DOUBLE_EQ(metric(m, "layer1_compute_ms"), 2);
  EXPECT_DOUBLE_EQ(metric(m, "layer1_wait_ms"), 6);
  EXPECT_DOUBLE_EQ(metric(m, "layer2_compute_ms"), 1.5);
  EXPECT_DOUBLE_EQ(metric(m, "layer2_wait_ms"), 0.5);
  for (const Metric& x : m) EXPECT_NE(x.name.rfind("layer0_", 0), 0u) << "layer 0 has no expert phase";
  // A resident run: no drive metrics, and no read figures become NaN, not 0.
  const auto r = run_metrics({PromptRun{}}, DriveWindow{}, 1.0, 1);
  EXPECT_TRUE(std::isnan(metric(r, "hit_rate")));
  for (const Metric& x : r) EXPECT_EQ(x.name.find("drive"), std::string::npos) << x.name;
}

TEST(BenchPrompts, BuiltInPromptsAreFixedAndFitTheVocabulary) {
  const auto a = builtin_prompts(300), b = builtin_prompts(300);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].ids.size(), 4u);
  EXPECT_EQ(a[1].ids.size(), 16u);
  EXPECT_EQ(a[2].ids.size(), 64u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, b[i].ids);
    for (uint32_t id : a[i].ids) EXPECT_LT(id, 300u);
  }
}

TEST(BenchPrompts, FileHoldsIdsOrTextOnePerLine) {
  test::TempDir tmp;
  const std::string path = tmp.file("p.txt");
  test::write_bytes(path, "1, 2,3\n\n  \nhello world\r\n7\n");
  const auto encode = [](const std::string& s) { return std::vector<uint32_t>(s.size(), 9u); };
  const auto p = read_prompts_file(path, encode, 100);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].ids, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(p[0].name, "p.txt:1");
  EXPECT_EQ(p[1].ids.size(), 11u);  // "hello world" through the encoder, without the \r
  EXPECT_EQ(p[1].name, "p.txt:4");
  EXPECT_EQ(p[2].ids, (std::vector<uint32_t>{7}));
  test::write_bytes(path, "1,2\n3,100\n");
  EXPECT_FAILS_WITH(read_prompts_file(path, encode, 100), "p.txt:2", "100", "vocabulary");
  test::write_bytes(path, "1,,2\n");
  EXPECT_FAILS_WITH(read_prompts_file(path, encode, 100), "p.txt:1", "empty token id");
  test::write_bytes(path, "\n\n");
  EXPECT_FAILS_WITH(read_prompts_file(path, encode, 100), "--prompts", "no prompts");
  EXPECT_FAILS_WITH(read_prompts_file(tmp.file("missing.txt"), encode, 100), "missing.txt");
}

}  // namespace
}  // namespace deltafin
