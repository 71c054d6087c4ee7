#include "engine/prefill_estimate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "engine/prefill.h"
#include "model/common/causal_model.h"
#include "tokenizer/token_text.h"

namespace deltafin {

PrefillEstimate::PrefillEstimate(double prior_pair_ratio)
    : prior_ratio_(std::isfinite(prior_pair_ratio) && prior_pair_ratio > 0 ? prior_pair_ratio : kFallbackPairRatio) {}

double PrefillEstimate::prior_pair_ratio(const ModelSummary& shape) {
  const double position_bytes = static_cast<double>(shape.top_k) * static_cast<double>(shape.expert_record_bytes) *
                                static_cast<double>(shape.moe_layers.size());
  if (position_bytes <= 0 || shape.session_bytes_per_position == 0) return kFallbackPairRatio;
  return static_cast<double>(shape.session_bytes_per_position) / position_bytes;
}

// In doubles, exact while the products stay below 2^53 (prompts of tens of
// millions of positions); (positions + 1) x positions is even, so the
// halving is exact too.
double PrefillEstimate::pairs(int64_t positions, int64_t before) {
  if (positions <= 0) return 0;
  const double p = static_cast<double>(positions), b = static_cast<double>(std::max<int64_t>(before, 0));
  return p * b + p * (p + 1) / 2;
}

// One sample into the decayed weighted moments (West's incremental update,
// which stays accurate when the contexts are large and close together, unlike
// sums of squares): the older samples' weights shrink by kDecay, which leaves
// the means and scales the co-moments.
bool PrefillEstimate::add(int64_t positions, int64_t before, double seconds) {
  if (positions <= 0 || before < 0 || !std::isfinite(seconds) || seconds <= 0) {
    ++ignored_;
    return false;
  }
  const double w = static_cast<double>(positions);
  const double x = pairs(positions, before) / w;  // the mean context of its positions
  const double y = seconds / w;
  w_ *= kDecay, cxx_ *= kDecay, cxy_ *= kDecay;
  const double total = w_ + w;
  const double dx = x - mx_, dy = y - my_;
  mx_ += dx * w / total;
  my_ += dy * w / total;
  cxx_ += w * dx * (x - mx_);
  cxy_ += w * dx * (y - my_);
  w_ = total;
  return true;
}

void PrefillEstimate::calibrate(int64_t positions, int64_t before, double seconds) {
  std::lock_guard lock(mu_);
  if (add(positions, before, seconds)) ++calibration_samples_;
}

void PrefillEstimate::observe(int64_t positions, int64_t before, double seconds) {
  std::lock_guard lock(mu_);
  if (add(positions, before, seconds)) ++measured_samples_;
}

void PrefillEstimate::fix(double seconds_per_position, double seconds_per_pair) {
  std::lock_guard lock(mu_);
  fixed_ = Rates{std::max(0.0, seconds_per_position), std::max(0.0, seconds_per_pair), false};
}

double PrefillEstimate::spread() const { return w_ > 0 ? std::sqrt(std::max(0.0, cxx_) / w_) : 0; }

// The weighted least-squares line through the samples, its rates kept
// nonnegative: a negative slope (noise on samples of close contexts) is
// redone as a flat line (b = 0, a = the mean), a negative intercept as a
// line through the origin (a = 0). Samples have y > 0, so neither redo goes
// negative.
PrefillEstimate::Rates PrefillEstimate::fit_line() const {
  double b = cxy_ / cxx_;
  double a = my_ - b * mx_;
  if (b < 0) return {my_, 0, true};
  if (a < 0) return {0, (cxy_ + w_ * mx_ * my_) / (cxx_ + w_ * mx_ * mx_), true};
  return {a, b, true};
}

// b = r a: y = a (1 + r x), so a is the weighted least-squares fit through
// the origin in z = 1 + r x, from the same moments (sum w z y / sum w z^2).
PrefillEstimate::Rates PrefillEstimate::fit_a_with_prior() const {
  const double r = prior_ratio_;
  const double szy = w_ * my_ + r * (cxy_ + w_ * mx_ * my_);
  const double szz = w_ + 2 * r * w_ * mx_ + r * r * (cxx_ + w_ * mx_ * mx_);
  const double a = std::max(0.0, szy / szz);
  return {a, r * a, false};
}

PrefillEstimate::Rates PrefillEstimate::rates() const {
  if (fixed_) return *fixed_;
  if (w_ <= 0) return {};
  if (spread() >= kMinContextSpread && cxx_ > 0) return fit_line();
  return fit_a_with_prior();
}

double PrefillEstimate::seconds(int64_t positions, int64_t before) const {
  if (positions <= 0) return 0;
  std::lock_guard lock(mu_);
  const Rates r = rates();
  return r.a * static_cast<double>(positions) + r.b * pairs(positions, before);
}

PrefillEstimate::Report PrefillEstimate::describe() const {
  std::lock_guard lock(mu_);
  const Rates r = rates();
  Report rep;
  rep.source = fixed_                    ? "fixed"
               : measured_samples_ > 0   ? "measured"
               : calibration_samples_ > 0 ? "calibration"
                                          : "none";
  rep.seconds_per_position = r.a;
  rep.seconds_per_pair = r.b;
  rep.pair_rate = fixed_ ? "fixed" : r.b_fitted ? "fitted" : "prior";
  rep.prior_pair_ratio = prior_ratio_;
  rep.calibration_samples = calibration_samples_;
  rep.measured_samples = measured_samples_;
  rep.ignored_samples = ignored_;
  rep.context_spread = spread();
  return rep;
}

namespace {

// Ordinary text, so that a streamed store's experts are routed as a prompt's
// would be; ids counted up from 0 where the tokenizer makes nothing of it.
std::vector<uint32_t> calibration_tokens(const TokenText& text, int64_t vocab, size_t n) {
  const std::vector<uint32_t> base = text.encode_ordinary(
      "The committee met on Tuesday to review the budget for the coming year, and after a long discussion of the "
      "roads, the library and the school, it agreed to publish its figures before the end of the month. ");
  std::vector<uint32_t> out;
  out.reserve(n);
  for (size_t i = 0; out.size() < n; ++i)
    out.push_back(base.empty() ? static_cast<uint32_t>(i % static_cast<size_t>(std::max<int64_t>(vocab, 1)))
                               : base[i % base.size()]);
  return out;
}

}  // namespace

void calibrate_prefill_estimate(PrefillEstimate& estimate, CausalModel& model, const TokenText& text, int64_t chunk,
                                int64_t group) {
  using Clock = std::chrono::steady_clock;
  const size_t n = static_cast<size_t>(kCalibrationPositions);
  const std::vector<uint32_t> tokens = calibration_tokens(text, model.summary().vocab, 2 * n);
  model.set_capture_layers({});
  std::unique_ptr<ModelSession> session = model.new_session();
  session->plan_length(static_cast<int64_t>(2 * n));
  for (size_t at = 0; at < 2 * n; at += n) {
    const auto t0 = Clock::now();
    prefill(model, *session, std::span<const uint32_t>(tokens).subspan(at, n), chunk, nullptr, {}, {}, group);
    estimate.calibrate(static_cast<int64_t>(n), static_cast<int64_t>(at),
                       std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

}  // namespace deltafin
