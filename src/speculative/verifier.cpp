#include "speculative/verifier.h"

#include "model/common/greedy.h"

namespace deltafin {

Verification Verifier::run(ModelSession& session, uint32_t last, std::span<const uint32_t> drafts) {
  std::vector<uint32_t> tokens;
  tokens.reserve(drafts.size() + 1);
  tokens.push_back(last);
  tokens.insert(tokens.end(), drafts.begin(), drafts.end());
  Verification v;
  v.logits = model_.forward_verify(session, tokens);
  for (size_t i = 0; i < tokens.size(); ++i) v.greedy.push_back(argmax_first(v.logits.row(i), v.logits.n));
  while (v.accepted < drafts.size() && drafts[v.accepted] == v.greedy[v.accepted]) ++v.accepted;
  return v;
}

void Verifier::commit(ModelSession& session, size_t rows) { model_.keep_verified(session, rows); }

}  // namespace deltafin
