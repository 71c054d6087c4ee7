#include "model/common/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace deltafin {

using nlohmann::json;

double yarn_get_mscale(double factor, double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }

namespace {

// A number field of a rope object, > 0 and finite.
double rope_number(const json& p, const char* key, const std::string& where) {
  const json& v = p.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
    fail(where, ".", key, " = ", v.dump(), ", expected a finite number > 0");
  return v.get<double>();
}

// The pair index whose wavelength spans max_positions / (beta) positions.
double yarn_correction_dim(double beta, double dim, double theta, double max_positions) {
  return dim * std::log(max_positions / (beta * 2 * std::numbers::pi)) / (2 * std::log(theta));
}

}  // namespace

void parse_rope_object(const json& p, const std::string& where, int64_t max_position_embeddings, YarnScaling& y,
                       double* theta) {
  if (!p.is_object()) fail(where, " must be an object, found ", p.dump());
  std::string type = "default";
  for (const char* key : {"rope_type", "type"})
    if (p.contains(key)) {
      if (!p.at(key).is_string()) fail(where, ".", key, " must be a string, found ", p.at(key).dump());
      type = p.at(key).get<std::string>();
    }
  if (type != "default" && type != "yarn")
    fail(where, ".rope_type = \"", type, "\" is not supported (only \"default\" and \"yarn\")");
  const bool yarn = type == "yarn";
  for (auto it = p.begin(); it != p.end(); ++it) {
    const std::string& k = it.key();
    const bool common = k == "rope_type" || k == "type" || k == "rope_theta";
    const bool yarn_key = k == "factor" || k == "original_max_position_embeddings" || k == "beta_fast" ||
                          k == "beta_slow" || k == "attention_factor" || k == "mscale" || k == "mscale_all_dim" ||
                          k == "truncate";
    if (!common && !(yarn && yarn_key))
      fail(where, ".", k, " is not supported for rope_type \"", type, "\"");
  }
  if (p.contains("rope_theta")) *theta = rope_number(p, "rope_theta", where);
  if (!yarn) return;
  y.enabled = true;
  if (!p.contains("factor")) fail(where, ".factor is missing (YaRN needs its scaling factor)");
  y.factor = rope_number(p, "factor", where);
  if (y.factor < 1) fail(where, ".factor = ", y.factor, ", expected >= 1");
  y.original_max_position_embeddings = max_position_embeddings;
  if (p.contains("original_max_position_embeddings")) {
    const json& v = p.at("original_max_position_embeddings");
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      fail(where, ".original_max_position_embeddings = ", v.dump(), ", expected an integer >= 1");
    y.original_max_position_embeddings = v.get<int64_t>();
  }
  if (p.contains("beta_fast") && !p.at("beta_fast").is_null()) y.beta_fast = rope_number(p, "beta_fast", where);
  if (p.contains("beta_slow") && !p.at("beta_slow").is_null()) y.beta_slow = rope_number(p, "beta_slow", where);
  if (p.contains("truncate")) {
    if (!p.at("truncate").is_boolean()) fail(where, ".truncate must be true or false, found ", p.at("truncate").dump());
    y.truncate = p.at("truncate").get<bool>();
  }
  const bool has_mscale = p.contains("mscale") && !p.at("mscale").is_null();
  const bool has_all = p.contains("mscale_all_dim") && !p.at("mscale_all_dim").is_null();
  if (has_mscale) y.mscale = rope_number(p, "mscale", where);
  if (has_all) y.mscale_all_dim = rope_number(p, "mscale_all_dim", where);
  if (p.contains("attention_factor") && !p.at("attention_factor").is_null()) {
    y.attention_factor = rope_number(p, "attention_factor", where);
  } else if (has_mscale && has_all) {
    y.attention_factor = yarn_get_mscale(y.factor, y.mscale) / yarn_get_mscale(y.factor, y.mscale_all_dim);
  } else {
    y.attention_factor = yarn_get_mscale(y.factor, 1.0);
  }
}

RopeFreqs make_rope(int64_t rotated, double theta, const YarnScaling& y) {
  const size_t half = static_cast<size_t>(rotated / 2);
  const double dim = static_cast<double>(rotated);
  RopeFreqs r;
  r.inv_freq.resize(half);
  for (size_t i = 0; i < half; ++i) r.inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / dim);
  if (!y.enabled) return r;
  // Pairs below `low` keep their frequency (extrapolation), pairs above
  // `high` are divided by the factor (interpolation), a linear ramp between.
  const double L0 = static_cast<double>(y.original_max_position_embeddings);
  double low = yarn_correction_dim(y.beta_fast, dim, theta, L0);
  double high = yarn_correction_dim(y.beta_slow, dim, theta, L0);
  if (y.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  for (size_t i = 0; i < half; ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double keep = 1.0 - ramp;  // the extrapolation share
    r.inv_freq[i] = r.inv_freq[i] / y.factor * (1.0 - keep) + r.inv_freq[i] * keep;
  }
  r.attention_factor = y.attention_factor;
  return r;
}

void rope_tables(const RopeFreqs& r, int64_t start, size_t T, std::vector<float>& cos_t, std::vector<float>& sin_t) {
  const size_t half = r.inv_freq.size();
  cos_t.assign(T * half, 0.0f);
  sin_t.assign(T * half, 0.0f);
  for (size_t t = 0; t < T; ++t) {
    const double pos = static_cast<double>(start + static_cast<int64_t>(t));
    for (size_t i = 0; i < half; ++i) {
      cos_t[t * half + i] = static_cast<float>(std::cos(pos * r.inv_freq[i]) * r.attention_factor);
      sin_t[t * half + i] = static_cast<float>(std::sin(pos * r.inv_freq[i]) * r.attention_factor);
    }
  }
}


}  // namespace deltafin
