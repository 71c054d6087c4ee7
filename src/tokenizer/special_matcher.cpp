#include "tokenizer/special_matcher.h"

#include "util/error.h"

namespace deltafin {

SpecialMatcher::SpecialMatcher(const std::vector<std::pair<std::string, uint32_t>>& specials) {
  nodes_.emplace_back();  // root
  for (const auto& [spelling, id] : specials) {
    if (spelling.empty()) fail("special token ", id, " has an empty spelling");
    uint32_t node = 0;
    for (char ch : spelling) {
      unsigned char b = static_cast<unsigned char>(ch);
      uint32_t next = child(node, b);
      if (next == 0) {
        next = static_cast<uint32_t>(nodes_.size());
        nodes_[node].children.emplace_back(b, next);
        nodes_.emplace_back();  // may reallocate: index, never hold references
      }
      node = next;
    }
    if (nodes_[node].terminal)
      fail("special spelling \"", spelling, "\" is given twice (ids ", nodes_[node].id, " and ", id, ")");
    nodes_[node].terminal = true;
    nodes_[node].id = id;
    first_byte_[static_cast<unsigned char>(spelling[0])] = true;
  }
}

uint32_t SpecialMatcher::child(uint32_t node, unsigned char byte) const {
  for (const auto& [b, index] : nodes_[node].children)
    if (b == byte) return index;
  return 0;
}

bool SpecialMatcher::find(std::string_view text, size_t from, Match* match) const {
  if (nodes_.size() <= 1) return false;
  for (size_t start = from; start < text.size(); ++start) {
    if (!first_byte_[static_cast<unsigned char>(text[start])]) continue;
    uint32_t node = 0;
    bool found = false;
    for (size_t k = start; k < text.size(); ++k) {
      node = child(node, static_cast<unsigned char>(text[k]));
      if (node == 0) break;
      if (nodes_[node].terminal) {  // keep walking: a longer spelling wins
        found = true;
        match->start = start;
        match->length = k + 1 - start;
        match->id = nodes_[node].id;
      }
    }
    if (found) return true;
  }
  return false;
}

}  // namespace deltafin
