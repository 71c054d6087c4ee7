// Reading a config.json object field by field: every error names the file and
// the field, and the fields nobody asked for can be listed afterwards, so a
// family's parser refuses what it does not implement instead of ignoring it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deltafin {

class ConfigFields {
public:
  ConfigFields(const nlohmann::json& obj, std::string source);

  // Present and not null (and marks the field as read).
  bool has(const std::string& key);
  const nlohmann::json& get(const std::string& key);  // must be present
  int64_t integer(const std::string& key, int64_t min_value);
  double positive(const std::string& key);  // finite and > 0; integers accepted
  bool boolean(const std::string& key);
  std::string string(const std::string& key);
  // An optional field that, when present and not null, must equal `expected`:
  // an option the forward pass does not implement.
  void only(const std::string& key, const nlohmann::json& expected, const char* why);
  // The fields present that no call above asked for.
  void collect_unused(std::vector<std::string>& out) const;
  const std::string& source() const { return source_; }
  const nlohmann::json& object() const { return obj_; }

private:
  const nlohmann::json& obj_;
  std::string source_;
  std::set<std::string> used_;
};

}  // namespace deltafin
