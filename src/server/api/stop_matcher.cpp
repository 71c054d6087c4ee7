#include "server/api/stop_matcher.h"

#include <algorithm>

namespace deltafin::api {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return "";
  if (stops_.empty()) return std::string(text);
  held_ += text;

  // Earliest occurrence of any stop. held_ held no complete stop before this
  // push and no position before it can start one (see below), so a search of
  // held_ finds the first stop in the whole output.
  size_t first = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at < first) {  // of stops found at the same place, the first listed
      first = at;
      which = &s;
    }
  }
  if (which) {
    std::string out = held_.substr(0, first);
    held_.clear();
    stopped_ = true;
    matched_ = *which;
    return out;
  }

  // Keep the longest suffix that is a proper prefix of some stop; anything
  // before it can no longer begin a stop. Text and stops are valid UTF-8, so
  // the cut (where a stop's first byte would be) is a character boundary.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
      if (std::string_view(held_).substr(held_.size() - k) == std::string_view(s).substr(0, k)) {
        keep = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace deltafin::api
