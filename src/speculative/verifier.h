// One speculative verification (k3-model.md §10.1): the target runs
// [last, d1..dn] as one (n+1)-position pass, its greedy choice after each row
// is g0..gn, and the accepted prefix is the longest run with d(i+1) == g(i).
// The caller then commits the rows it emits tokens for (normally m + 1:
// last, d1..dm), and the session ends exactly as if those positions had been
// decoded one at a time (CausalModel::keep_verified: K3 cuts its MLA caches
// and replays its KDA state, a KV-cache family truncates).
#pragma once

#include <span>
#include <vector>

#include "model/common/causal_model.h"

namespace deltafin {

struct Verification {
  Rows logits;                  // [n+1, V]: row i = the target's logits after row i
  std::vector<uint32_t> greedy; // g0..gn (argmax, first index on ties)
  size_t accepted = 0;          // m: drafts equal to the target's choices, from the first
};

class Verifier {
public:
  explicit Verifier(CausalModel& model) : model_(model) {}

  // Runs the pass; the session has advanced by all n+1 rows until commit().
  Verification run(ModelSession& session, uint32_t last, std::span<const uint32_t> drafts);
  // Keeps the first `rows` positions of the last run (1 <= rows <= n+1).
  void commit(ModelSession& session, size_t rows);

private:
  CausalModel& model_;
};

}  // namespace deltafin
