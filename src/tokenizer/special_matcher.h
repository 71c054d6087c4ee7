// Finds special-token spellings in text: the earliest position where some
// spelling starts, and at that position the longest spelling (for K3's
// prefix-unambiguous spellings at most one can match anyway). A byte trie,
// so the scan costs O(text length x longest spelling) whatever the number of
// spellings.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deltafin {

class SpecialMatcher {
public:
  struct Match {
    size_t start = 0;
    size_t length = 0;
    uint32_t id = 0;
  };

  SpecialMatcher() = default;
  // (spelling, id) pairs; spellings non-empty and distinct (checked).
  explicit SpecialMatcher(const std::vector<std::pair<std::string, uint32_t>>& specials);

  // The first match at or after `from`; false if there is none.
  bool find(std::string_view text, size_t from, Match* match) const;

private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> children;  // byte -> node index
    uint32_t id = 0;
    bool terminal = false;
  };
  uint32_t child(uint32_t node, unsigned char byte) const;  // node index or 0 (root is never a child)

  std::vector<Node> nodes_;
  std::array<bool, 256> first_byte_{};  // quick filter: can a spelling start with this byte
};

}  // namespace deltafin
