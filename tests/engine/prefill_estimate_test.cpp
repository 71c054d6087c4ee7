// PrefillEstimate, the cost model of admission by time: the pair count and
// the fits worked by hand (samples made from known rates give them back; one
// sample, equal contexts and degenerate lines give sane nonnegative rates;
// older samples weigh less by kDecay), and the engine's calibration on a tiny
// model of each family (two samples, nothing kept, the output unchanged).
#include "engine/prefill_estimate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/common/causal_model.h"
#include "support/family_model.h"
#include "support/test_support.h"

using namespace deltafin;

namespace {

// Relative closeness for values a fit reaches through a few roundings.
void expect_close(double got, double want, const char* what) {
  EXPECT_NEAR(got, want, std::abs(want) * 1e-9 + 1e-15) << what;
}

TEST(PrefillEstimate, PairsCountedByHand) {
  EXPECT_EQ(PrefillEstimate::pairs(0, 10), 0);
  EXPECT_EQ(PrefillEstimate::pairs(1, 0), 1);       // the one position sees itself
  EXPECT_EQ(PrefillEstimate::pairs(3, 0), 6);       // 1 + 2 + 3
  EXPECT_EQ(PrefillEstimate::pairs(2, 5), 13);      // 6 + 7
  EXPECT_EQ(PrefillEstimate::pairs(32, 32), 1552);  // 33 + ... + 64 = 97 x 16
  EXPECT_EQ(PrefillEstimate::pairs(640000, 0), 204800320000.0);  // 640000 x 640001 / 2, a megabyte of prompt
}

TEST(PrefillEstimate, SamplesFromKnownRatesGiveThemBack) {
  // a = 2 ms per position, b = 0.5 us per pair; seconds = a p + b pairs:
  // (100, 0): 0.2 + 5050 b; (100, 1000): 0.2 + 105050 b; (50, 5000): 0.1 + 251275 b.
  PrefillEstimate e(0.5);  // a prior far from b / a = 2.5e-4, so a prior would show
  e.observe(100, 0, 0.202525);
  e.observe(100, 1000, 0.252525);
  e.observe(50, 5000, 0.2256375);
  const PrefillEstimate::Report r = e.describe();
  expect_close(r.seconds_per_position, 2e-3, "a");
  expect_close(r.seconds_per_pair, 5e-7, "b");
  EXPECT_EQ(r.pair_rate, "fitted");
  EXPECT_EQ(r.source, "measured");
  EXPECT_EQ(r.measured_samples, 3);
  // 1000 positions cold: 2 + 500500 x 5e-7 = 2.25025 s; 10 after 10000: 0.02 + 100055 x 5e-7.
  expect_close(e.seconds(1000, 0), 2.25025, "1000 cold");
  expect_close(e.seconds(10, 10000), 0.0700275, "10 after 10000");
  EXPECT_EQ(e.seconds(0, 5), 0);
}

TEST(PrefillEstimate, NothingKnownEstimatesNothing) {
  PrefillEstimate e;
  EXPECT_EQ(e.seconds(1000000, 0), 0);
  EXPECT_EQ(e.describe().source, "none");
}

TEST(PrefillEstimate, OneSampleFitsAWithThePriorRatio) {
  // Prior b = 0.2 a. (10, 0): 55 pairs, 0.21 s = 10 a + 55 x 0.2 a = 21 a.
  PrefillEstimate e(0.2);
  e.observe(10, 0, 0.21);
  const PrefillEstimate::Report r = e.describe();
  expect_close(r.seconds_per_position, 0.01, "a");
  expect_close(r.seconds_per_pair, 0.002, "b");
  EXPECT_EQ(r.pair_rate, "prior");
}

TEST(PrefillEstimate, BadSamplesAreIgnoredAndCounted) {
  PrefillEstimate e(0.2);
  e.observe(10, 0, 0);                                          // zero seconds
  e.observe(10, 0, -1);                                         // negative
  e.observe(10, 0, std::numeric_limits<double>::quiet_NaN());  // not a number
  e.observe(10, 0, std::numeric_limits<double>::infinity());
  e.observe(0, 0, 1);    // no positions
  e.observe(10, -1, 1);  // a negative context
  PrefillEstimate::Report r = e.describe();
  EXPECT_EQ(r.ignored_samples, 6);
  EXPECT_EQ(r.measured_samples, 0);
  EXPECT_EQ(r.source, "none");
  EXPECT_EQ(r.seconds_per_position, 0);
  EXPECT_EQ(r.seconds_per_pair, 0);
  e.observe(10, 0, 0.21);  // a good one afterwards is fitted as if alone
  expect_close(e.describe().seconds_per_position, 0.01, "a");
}

TEST(PrefillEstimate, EqualContextsKeepThePriorAndNewerSamplesWeighMore) {
  // Both samples at mean context 5.5: no spread, so b = 0.2 a and a is the
  // weighted mean of y = seconds / 10 over z = 1 + 0.2 x 5.5 = 2.1. The older
  // sample weighs 0.9 x 10, the newer 10: a = (9 x 0.021 + 10 x 0.042) /
  // (19 x 2.1) = 0.609 / 39.9 (without decay: 0.015).
  PrefillEstimate e(0.2);
  e.observe(10, 0, 0.21);
  e.observe(10, 0, 0.42);
  const PrefillEstimate::Report r = e.describe();
  expect_close(r.seconds_per_position, 0.609 / 39.9, "a");
  expect_close(r.seconds_per_pair, 0.2 * 0.609 / 39.9, "b");
  EXPECT_EQ(r.pair_rate, "prior");
  EXPECT_EQ(r.context_spread, 0);
}

TEST(PrefillEstimate, DecayWeighsTheFittedLineTowardsNewerSamples) {
  // Mean contexts 50.5, 1050.5, 50.5 (weights 100 x 0.81, 100 x 0.9, 100).
  // With two distinct contexts the least-squares line passes through the
  // weighted mean of y at each: at 50.5, (81 x 0.003 + 100 x 0.0021) / 181 =
  // 0.453 / 181; at 1050.5, 0.004. Without decay the first would be 0.00255.
  PrefillEstimate e(0.5);
  e.observe(100, 0, 0.3);
  e.observe(100, 1000, 0.4);
  e.observe(100, 0, 0.21);
  const double y0 = 0.453 / 181, b = (0.004 - y0) / 1000, a = y0 - 50.5 * b;
  const PrefillEstimate::Report r = e.describe();
  EXPECT_EQ(r.pair_rate, "fitted");
  expect_close(r.seconds_per_pair, b, "b");
  expect_close(r.seconds_per_position, a, "a");
}

TEST(PrefillEstimate, ALongerContextFasterGivesNoNegativeB) {
  // y 0.003 at 50.5, 0.002 at 1050.5: the line falls; b = 0 and a = the
  // weighted mean (90 x 0.003 + 100 x 0.002) / 190 = 0.47 / 190.
  PrefillEstimate e(0.5);
  e.observe(100, 0, 0.3);
  e.observe(100, 1000, 0.2);
  const PrefillEstimate::Report r = e.describe();
  EXPECT_EQ(r.seconds_per_pair, 0);
  expect_close(r.seconds_per_position, 0.47 / 190, "a");
}

TEST(PrefillEstimate, ALineBelowTheOriginGivesNoNegativeA) {
  // y 1e-5 at 50.5, 0.01 at 1050.5: the line crosses zero above x = 0, so a =
  // 0 and b is the fit through the origin, sum w x y / sum w x^2 (w 90, 100).
  PrefillEstimate e(0.5);
  e.observe(100, 0, 0.001);
  e.observe(100, 1000, 1.0);
  const double b = (90 * 50.5 * 1e-5 + 100 * 1050.5 * 0.01) / (90 * 50.5 * 50.5 + 100 * 1050.5 * 1050.5);
  const PrefillEstimate::Report r = e.describe();
  EXPECT_EQ(r.seconds_per_position, 0);
  expect_close(r.seconds_per_pair, b, "b");
}

TEST(PrefillEstimate, FixedRatesIgnoreSamples) {
  PrefillEstimate e;
  e.fix(1, 0.5);
  e.observe(10, 0, 100);
  EXPECT_EQ(e.seconds(10, 0), 10 + 0.5 * 55);
  const PrefillEstimate::Report r = e.describe();
  EXPECT_EQ(r.source, "fixed");
  EXPECT_EQ(r.measured_samples, 1);
}

TEST(PrefillEstimate, PriorRatioFromTheShape) {
  ModelSummary s;
  s.top_k = 2;
  s.expert_record_bytes = 1000;
  s.moe_layers = {1, 2, 3};
  s.session_bytes_per_position = 600;  // 600 / (2 x 1000 x 3)
  EXPECT_DOUBLE_EQ(PrefillEstimate::prior_pair_ratio(s), 0.1);
  s.moe_layers.clear();
  EXPECT_EQ(PrefillEstimate::prior_pair_ratio(s), PrefillEstimate::kFallbackPairRatio);
}

// The engine's startup calibration, on each family's tiny model: two
// samples seed the estimate, no prompt state is kept and no request counted,
// and a generation afterwards gives the tokens an uncalibrated engine gives.
class PrefillCalibration : public ::testing::TestWithParam<std::string> {
protected:
  LoadedModel& lm() { return test::shared_family_model(GetParam(), 23); }
};

TEST_P(PrefillCalibration, SeedsTheEstimateAndChangesNothingElse) {
  std::vector<uint32_t> prompt = test::random_tokens(5, 12, static_cast<uint32_t>(lm().summary().vocab));
  GenerateRequest req;
  req.prompt = prompt;
  req.max_new = 6;
  req.stop.ignore_end_token = true;
  auto tokens_of = [&](Engine& engine) {
    std::vector<uint32_t> out;
    engine.generate(req, [&](uint32_t id) { return out.push_back(id), true; });
    return out;
  };
  std::vector<uint32_t> plain;
  {
    Engine engine(lm(), EngineSettings{}, nullptr);
    EXPECT_EQ(engine.prefill_estimate_report().source, "none");
    plain = tokens_of(engine);
  }
  EngineSettings so;
  so.calibrate_prefill = true;
  Engine engine(lm(), so, nullptr);
  const PrefillEstimate::Report r = engine.prefill_estimate_report();
  EXPECT_EQ(r.source, "calibration");
  EXPECT_EQ(r.calibration_samples, 2);
  EXPECT_EQ(r.pair_rate, "prior");  // contexts 16.5 and 48.5: spread 16, below kMinContextSpread
  EXPECT_GT(r.seconds_per_position, 0);
  EXPECT_GT(engine.estimate_prefill_seconds(1000, 0), 0);
  const Engine::Totals t = engine.totals();
  EXPECT_EQ(t.requests, 0);
  EXPECT_EQ(t.cache_entries, 0u);
  EXPECT_EQ(engine.reusable_prefix(prompt), 0);
  EXPECT_EQ(tokens_of(engine), plain);
  // The request is a measurement now, and its prompt is kept: a repeat
  // would reuse all but its last token.
  EXPECT_EQ(engine.prefill_estimate_report().source, "measured");
  EXPECT_EQ(engine.prefill_estimate_report().measured_samples, 1);
  EXPECT_EQ(engine.reusable_prefix(prompt), static_cast<int64_t>(prompt.size()) - 1);
}

// With concurrent requests a prefill that shared its steps with another
// request timed their work too: only one that ran alone is a sample. A
// decodes (slowed by the test hook) while B runs beside it; C runs after.
TEST_P(PrefillCalibration, OnlyAPrefillThatRanAloneIsMeasured) {
  EngineSettings so;
  so.parallel = 2;
  Engine engine(lm(), so, nullptr);
  engine.set_test_hooks({.step_delay_ms = 20});
  const uint32_t vocab = static_cast<uint32_t>(lm().summary().vocab);
  auto request = [&](uint64_t seed, int64_t max_new) {
    GenerateRequest r;
    r.prompt = test::random_tokens(seed, 12, vocab);
    r.max_new = max_new;
    r.stop.ignore_end_token = true;
    return r;
  };
  auto measured = [&] { return engine.prefill_estimate_report().measured_samples; };
  std::atomic<bool> stop_a{false};
  std::thread a([&] {  // a minute of tokens unless stopped
    engine.generate(request(1, 3000), [](uint32_t) { return true; }, [&] { return stop_a.load(); });
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (engine.progress().phase != "decode" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(engine.progress().phase, "decode");
  EXPECT_EQ(measured(), 1);  // A's prefill, alone
  engine.generate(request(2, 2), [](uint32_t) { return true; });
  EXPECT_EQ(measured(), 1);  // B's prefill ran beside A's decoding
  stop_a.store(true);
  a.join();
  engine.generate(request(3, 2), [](uint32_t) { return true; });
  EXPECT_EQ(measured(), 2);  // C's, alone again
}

INSTANTIATE_TEST_SUITE_P(Families, PrefillCalibration, ::testing::ValuesIn(test::target_families()),
                         test::family_name);

}  // namespace
