#include "cli/token_list.h"

#include <sstream>

#include "util/error.h"

namespace deltafin::cli {

std::vector<uint32_t> parse_token_list(const std::string& s, const std::string& option) {
  std::vector<uint32_t> ids;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    unsigned long v = 0;
    try {
      v = std::stoul(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v > 0xffffffffUL)
      fail(option, ": '", item, "' is not a token id (expected comma-separated non-negative integers)");
    ids.push_back(static_cast<uint32_t>(v));
  }
  if (ids.empty()) fail(option, ": no token ids given");
  return ids;
}

void check_token_ids(const std::vector<uint32_t>& ids, int64_t vocab, const std::string& option) {
  for (uint32_t id : ids)
    if (static_cast<int64_t>(id) >= vocab) fail(option, ": id ", id, " is outside the vocabulary of ", vocab);
}

}  // namespace deltafin::cli
