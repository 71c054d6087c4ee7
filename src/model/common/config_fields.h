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

// The largest dimension or count a config.json may give (widths, layers,
// heads, experts, ranks): far above any released model's, and low enough
// that a product of two stays far inside 64 bits and a per-layer table stays
// small, so a corrupt or hostile file is refused before anything is sized
// from it. Vocabulary sizes (token ids are 32-bit), token ids and
// max_position_embeddings (a bound on the context, nothing is allocated from
// it up front) are bounded by their own rules.
inline constexpr int64_t kMaxConfigSize = int64_t{1} << 20;

class ConfigFields {
public:
  ConfigFields(const nlohmann::json& obj, std::string source);

  // Present and not null (and marks the field as read).
  bool has(const std::string& key);
  const nlohmann::json& get(const std::string& key);  // must be present
  // An integer in [min_value, max_value].
  int64_t integer(const std::string& key, int64_t min_value, int64_t max_value = kMaxConfigSize);
  double positive(const std::string& key);  // finite and > 0; integers accepted
  bool boolean(const std::string& key);
  // A token id or a list of them (eos_token_id), each >= 0.
  std::vector<int64_t> token_ids(const std::string& key);
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
