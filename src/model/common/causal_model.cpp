#include "model/common/causal_model.h"

#include "util/error.h"

namespace deltafin {

void throw_wrong_family_session(const char* family) {
  fail(family, " model: the session belongs to another model family");
}

void check_batch_parts(std::span<const BatchPart> parts) {
  if (parts.empty()) fail("forward_batch: no parts");
  for (size_t p = 0; p < parts.size(); ++p) {
    if (!parts[p].session) fail("forward_batch: part ", p, " has no session");
    if (parts[p].tokens.empty()) fail("forward_batch: part ", p, " has no tokens");
    // A handful of parts: the pairs are fewer than a sort's bookkeeping.
    for (size_t q = 0; q < p; ++q)
      if (parts[q].session == parts[p].session) fail("forward_batch: parts ", q, " and ", p, " share a session");
  }
}

// One forward() per part. Only a family that captures overrides captured(),
// and this loop could hand back only the last part's capture, so a capture
// of several parts is refused rather than silently cut (K3, the family that
// captures, batches itself).
std::vector<Rows> CausalModel::forward_batch(std::span<const BatchPart> parts, const PassShape& shape) {
  check_batch_parts(parts);
  std::vector<Rows> logits;
  logits.reserve(parts.size());
  for (const BatchPart& part : parts) {
    Rows r = forward(*part.session, part.tokens, part.all_logits, shape);
    if (r.T == 0) return {};  // cancelled
    if (parts.size() > 1 && captured().T != 0)
      fail("forward_batch: this model captures hidden rows, which one forward() per part cannot stack");
    logits.push_back(std::move(r));
  }
  return logits;
}

}  // namespace deltafin
