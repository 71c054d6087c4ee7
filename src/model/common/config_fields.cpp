#include "model/common/config_fields.h"

#include <cmath>

#include "util/error.h"

namespace deltafin {

using nlohmann::json;

ConfigFields::ConfigFields(const json& obj, std::string source) : obj_(obj), source_(std::move(source)) {
  if (!obj_.is_object()) fail(source_, ": the root is not a JSON object");
}

bool ConfigFields::has(const std::string& key) {
  used_.insert(key);
  return obj_.contains(key) && !obj_.at(key).is_null();
}

const json& ConfigFields::get(const std::string& key) {
  used_.insert(key);
  if (!obj_.contains(key)) fail(source_, ": field ", key, " is missing");
  return obj_.at(key);
}

int64_t ConfigFields::integer(const std::string& key, int64_t min_value, int64_t max_value) {
  const json& v = get(key);
  if (!v.is_number_integer()) fail(source_, ": field ", key, " must be an integer, found ", v.dump());
  // An unsigned value past INT64_MAX must not wrap to a small one.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max_value))
    fail(source_, ": field ", key, " = ", v.dump(), ", expected <= ", max_value);
  const int64_t x = v.get<int64_t>();
  if (x < min_value) fail(source_, ": field ", key, " = ", x, ", expected >= ", min_value);
  if (x > max_value) fail(source_, ": field ", key, " = ", x, ", expected <= ", max_value);
  return x;
}

double ConfigFields::positive(const std::string& key) {
  const json& v = get(key);
  if (!v.is_number()) fail(source_, ": field ", key, " must be a number, found ", v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x) || !(x > 0)) fail(source_, ": field ", key, " = ", v.dump(), ", expected a finite number > 0");
  return x;
}

bool ConfigFields::boolean(const std::string& key) {
  const json& v = get(key);
  if (!v.is_boolean()) fail(source_, ": field ", key, " must be true or false, found ", v.dump());
  return v.get<bool>();
}

std::string ConfigFields::string(const std::string& key) {
  const json& v = get(key);
  if (!v.is_string()) fail(source_, ": field ", key, " must be a string, found ", v.dump());
  return v.get<std::string>();
}

void ConfigFields::only(const std::string& key, const json& expected, const char* why) {
  if (!has(key)) return;
  const json& v = obj_.at(key);
  if (v != expected) fail(source_, ": field ", key, " = ", v.dump(), " is not supported (", why, ")");
}

void ConfigFields::collect_unused(std::vector<std::string>& out) const {
  for (auto it = obj_.begin(); it != obj_.end(); ++it)
    if (!used_.count(it.key())) out.push_back(it.key());
}

std::vector<int64_t> ConfigFields::token_ids(const std::string& key) {
  const nlohmann::json& e = get(key);
  std::vector<int64_t> ids;
  if (e.is_number_integer() && e.get<int64_t>() >= 0) {
    ids.push_back(e.get<int64_t>());
  } else if (e.is_array()) {
    for (const nlohmann::json& x : e) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0)
        fail(source_, ": field ", key, " has an entry ", x.dump(), " that is not a token id");
      ids.push_back(x.get<int64_t>());
    }
  } else {
    fail(source_, ": field ", key, " = ", e.dump(), ", expected a token id or a list of them");
  }
  return ids;
}

}  // namespace deltafin
