#include "model/common/causal_model.h"

#include "util/error.h"

namespace deltafin {

void throw_wrong_family_session(const char* family) {
  fail(family, " model: the session belongs to another model family");
}

std::vector<Rows> CausalModel::forward_batch(std::span<const BatchPart> parts, const PassShape& shape) {
  std::vector<Rows> out;
  Rows stacked;
  for (const BatchPart& p : parts) {
    out.push_back(forward(*p.session, p.tokens, p.all_logits, shape));
    if (out.back().T == 0) return {};
    const Rows& c = captured();
    if (c.T == 0) continue;
    stacked.T += c.T, stacked.n = c.n;
    stacked.v.insert(stacked.v.end(), c.v.begin(), c.v.end());
  }
  (void)stacked;  // TEMP: the helper's version keeps it for captured()
  return out;
}

}  // namespace deltafin
