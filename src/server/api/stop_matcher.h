// StopMatcher: OpenAI `stop` strings. Text is held back while it could still
// be the start of a stop string; when one completes, the text before it is
// released, the stop string and everything after it are dropped, and
// stopped() turns true. Held back: the longest suffix of the text so far
// that is a proper prefix of some stop string. Of several stops the earliest
// occurrence wins. With no stop strings push() returns its input unchanged;
// empty stop strings are ignored. Text and stops are UTF-8, so every cut
// falls on a character boundary.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deltafin::api {

class StopMatcher {
public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds text; returns the text that can be shown now.
  std::string push(std::string_view text);
  // End of generation without a stop: the held-back text.
  std::string flush();
  bool stopped() const { return stopped_; }
  // The stop string that ended the text (empty until stopped()).
  const std::string& matched() const { return matched_; }

private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace deltafin::api
