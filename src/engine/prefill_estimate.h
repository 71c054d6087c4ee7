// What a prompt's prefill will cost, in seconds, before it runs: the measure
// `serve` admits requests by (--max-prefill-seconds), so that a prompt that
// would hold the server for hours is refused at once, naming the estimate.
//
// The model: prefilling `positions` new positions after `before` already in
// the session costs
//
//   seconds = a x positions + b x pairs(positions, before)
//
// a: the linear work of a position (the weights' products, its experts'
// reads); b: the attention work of one query-key pair, and pairs = the sum,
// over the new positions, of the keys each attends to (itself included):
// positions x before + positions x (positions + 1) / 2. The attention term
// grows with the square of the prompt, which is what makes a huge prompt
// cost hours.
//
// Both rates are measured. Each observed prefill is a sample (x = its mean
// context, pairs / positions; y = its seconds per position), weighted by its
// positions and decayed by kDecay per newer sample; the fit is the weighted
// least-squares line y = a + b x over them. b is fitted only once the samples'
// contexts differ (their weighted spread is at least kMinContextSpread
// positions): before that, and whenever the fit is degenerate, b is tied to
// a by the model's shape (prior_pair_ratio) and only a is fitted. Rates are
// never negative: a fit that makes one negative is redone with it at zero.
// Before any request, `serve` seeds the fit with a calibration of two short
// passes at startup (calibrate_prefill_estimate below).
//
// Known limit: on a streamed store a short prompt reads a store's experts for
// few positions (a pass reads the union of its rows' experts once), so its
// per-position cost is higher than a long prompt's; samples of short prompts
// (the calibration among them) overstate a long prompt's linear work there.
// The estimate errs towards refusing, never towards admitting.
//
// Thread-safe: the engine observes from the generating thread while the
// server asks from its workers.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace deltafin {

struct ModelSummary;
class CausalModel;
class TokenText;

class PrefillEstimate {
public:
  // Weight an older sample keeps per newer one: the last ~10 samples carry
  // two thirds of the fit, so it follows a machine that gets busier.
  static constexpr double kDecay = 0.9;
  // Positions of weighted spread between the samples' mean contexts before b
  // is fitted: below it a's noise would decide b (the calibration's two
  // passes, 16.5 and 48.5 positions of mean context, spread 16, do not fit it).
  static constexpr double kMinContextSpread = 64;
  // b / a when the model's shape says nothing (no routed experts).
  static constexpr double kFallbackPairRatio = 1e-3;

  explicit PrefillEstimate(double prior_pair_ratio = kFallbackPairRatio);

  // b / a from the model's shape, the prior until b is fitted: a pair reads
  // one key position's cache (session_bytes_per_position), a position reads
  // its routed experts (top_k x expert_record_bytes x MoE layers); both taken
  // as memory traffic at one rate. The spine is not counted (the shape does
  // not give its size), so the prior leans towards a larger b: towards
  // refusing. kFallbackPairRatio when the model has no routed experts.
  static double prior_pair_ratio(const ModelSummary& shape);

  // Query-key pairs of `positions` new positions after `before`:
  // positions x before + positions x (positions + 1) / 2 (0 for none).
  static double pairs(int64_t positions, int64_t before);

  // A sample from the startup calibration, and one from a request's real
  // prefill. A sample with no positions, a negative `before` or seconds that
  // are not a positive finite number is ignored (and counted).
  void calibrate(int64_t positions, int64_t before, double seconds);
  void observe(int64_t positions, int64_t before, double seconds);

  // Tests only: the rates are these from now on (source "fixed"); samples
  // are still counted, and no longer move them.
  void fix(double seconds_per_position, double seconds_per_pair);

  // a x positions + b x pairs; 0 for no positions, and 0 before any sample
  // (source "none": nothing is known, so nothing is refused by time).
  double seconds(int64_t positions, int64_t before) const;

  struct Report {
    std::string source = "none";  // "none", "calibration", "measured" (a request observed), "fixed"
    double seconds_per_position = 0, seconds_per_pair = 0;  // a, b
    std::string pair_rate = "prior";  // b "fitted" from the samples, or from the "prior" ratio, or "fixed"
    double prior_pair_ratio = 0;
    int64_t calibration_samples = 0, measured_samples = 0, ignored_samples = 0;
    double context_spread = 0;  // weighted spread of the samples' mean contexts, positions
  };
  Report describe() const;

private:
  struct Rates {
    double a = 0, b = 0;
    bool b_fitted = false;
  };
  bool add(int64_t positions, int64_t before, double seconds);  // false: ignored
  Rates rates() const;                                          // mu_ held
  Rates fit_line() const;
  Rates fit_a_with_prior() const;
  double spread() const;

  mutable std::mutex mu_;
  const double prior_ratio_;
  // Decayed weighted moments of the samples (West's update): total weight,
  // means of x and y, co-moments.
  double w_ = 0, mx_ = 0, my_ = 0, cxx_ = 0, cxy_ = 0;
  int64_t calibration_samples_ = 0, measured_samples_ = 0, ignored_ = 0;
  std::optional<Rates> fixed_;
};

// The startup calibration (EngineSettings::calibrate_prefill): on a fresh
// session, which is then dropped, one prefill of kCalibrationPositions
// positions of ordinary text and one of as many more after them, each timed
// and given to `estimate` as a calibration sample. Costs the prefill of a
// 64-token prompt (milliseconds on a small model; on K3 about what a 64-token
// prompt's prefill costs). Touches no prompt cache. On a streamed store it
// reads the routed experts of those positions through the expert cache, as
// any prompt does: the cache holds them afterwards and the heat histogram
// counts them (64 positions' routes, decayed like any), which changes which
// experts stay cached, never an output bit. A --route-trace records its two
// passes.
inline constexpr int64_t kCalibrationPositions = 32;
void calibrate_prefill_estimate(PrefillEstimate& estimate, CausalModel& model, const TokenText& text, int64_t chunk,
                                int64_t group);

}  // namespace deltafin
