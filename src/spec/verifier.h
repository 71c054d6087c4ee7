// One speculative verification (k3-model.md §10.1): the target runs
// [last, d1..dn] as one (n+1)-position pass, its greedy choice after each row
// is g0..gn, and the accepted prefix is the longest run with d(i+1) == g(i).
// The caller then commits the rows it emits tokens for (normally m + 1:
// last, d1..dm), and the session ends exactly as if those positions had been
// decoded one at a time: MLA caches cut, KDA state replayed from its
// pre-pass copy over the committed rows (model/kimi_k3/kda_log.h). AttnRes
// anchors live inside one pass, so nothing of them needs undoing.
#pragma once

#include <span>

#include "model/kimi_k3/model.h"

namespace deltafin {

struct Verification {
  Rows logits;                  // [n+1, V]: row i = the target's logits after row i
  std::vector<uint32_t> greedy; // g0..gn (argmax, first index on ties)
  size_t accepted = 0;          // m: drafts equal to the target's choices, from the first
};

class Verifier {
public:
  explicit Verifier(K3Model& model) : model_(model) {}

  // Runs the pass; the session has advanced by all n+1 rows until commit().
  Verification run(K3Session& session, uint32_t last, std::span<const uint32_t> drafts);
  // Keeps the first `rows` positions of the last run (1 <= rows <= n+1).
  void commit(K3Session& session, size_t rows);

private:
  K3Model& model_;
  KdaLog log_;
  K3Session::Snapshot before_;
  size_t pass_rows_ = 0;
};

}  // namespace deltafin
