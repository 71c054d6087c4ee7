// A drafter proposes tokens the target model may emit next. Proposals are
// untrusted (k3-model.md §10.1): the verifier runs them through the target and
// keeps only what the target itself would have chosen, so a drafter changes
// speed, never output.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deltafin {

struct Rows;

class Drafter {
public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Up to `k` tokens to follow `history`: the prompt and every emitted token,
  // the last one emitted by the target and not yet run through it. Fewer (or
  // none) when the drafter has nothing worth proposing. Between calls the
  // history only grows by the tokens emitted since.
  virtual std::vector<uint32_t> propose(std::span<const uint32_t> history, int k) = 0;
  // The target committed `rows` more positions (the prompt after prefill, or a
  // verification's accepted prefix); `captured` holds their context rows when
  // the target was asked to capture (DSpark), else it is empty.
  virtual void committed(const Rows& captured, size_t rows) {
    (void)captured;
    (void)rows;
  }
  // Target layers whose outputs this drafter reads (CausalModel::set_capture_layers).
  virtual std::vector<int64_t> capture_layers() const { return {}; }
};

}  // namespace deltafin
