#include "spec/verifier.h"

#include "util/error.h"

namespace deltafin {

Verification Verifier::run(K3Session& session, uint32_t last, std::span<const uint32_t> drafts) {
  std::vector<uint32_t> tokens;
  tokens.reserve(drafts.size() + 1);
  tokens.push_back(last);
  tokens.insert(tokens.end(), drafts.begin(), drafts.end());
  // The KDA state is fixed-size: copying it costs one pass over it, far less
  // than the pass; the MLA caches are only cut, never copied.
  before_ = session.snapshot();
  model_.set_kda_log(&log_);
  Verification v;
  try {
    v.logits = model_.forward(session, tokens, true);
  } catch (...) {
    model_.set_kda_log(nullptr);
    session.restore(before_);  // a failed pass (e.g. an expert read error) leaves the session as it was
    throw;
  }
  model_.set_kda_log(nullptr);
  pass_rows_ = tokens.size();
  for (size_t i = 0; i < tokens.size(); ++i) v.greedy.push_back(argmax_first(v.logits.row(i), v.logits.n));
  while (v.accepted < drafts.size() && drafts[v.accepted] == v.greedy[v.accepted]) ++v.accepted;
  return v;
}

void Verifier::commit(K3Session& session, size_t rows) {
  if (rows == 0 || rows > pass_rows_) fail("verifier: cannot commit ", rows, " rows of a ", pass_rows_, "-row pass");
  if (rows == pass_rows_) return;  // every row kept: the pass left the session exactly right
  session.rollback(before_, before_.length + static_cast<int64_t>(rows));
  model_.replay_kda(session, log_, rows);
}

}  // namespace deltafin
