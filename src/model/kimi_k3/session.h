// The state of one sequence: per KDA layer the three convolution windows and
// the recurrent state, per MLA layer the latent cache (k3-model.md §7.4
// decision: per position the normalised c_lat and k_r, fp32). (AttnRes anchors
// live only inside one position's pass through the layers, so nothing of them
// is carried between positions.) A snapshot taken at some length can be
// restored later, which is how speculation and prompt reuse roll back.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kimi_k3/config.h"
#include "model/kimi_k3/kda_log.h"
#include "model/common/causal_model.h"

namespace deltafin {

struct KdaState {
  std::vector<float> conv_q, conv_k, conv_v;  // [D_kda, kernel]: the last `kernel` raw inputs
  std::vector<float> recurrent;               // [H, K, K], index [h][k][v]
};

struct MlaCache {
  // [length, r_kv + d_rope]: per position RMSNorm(c_lat; kv_a_layernorm) ‖ k_r.
  // 2,304 bytes per position for K3, whatever the head count: the keys and
  // values of every head are kv_b_proj of it, folded into the attention.
  std::vector<float> latent;
};

class K3Session : public ModelSession {
public:
  explicit K3Session(const K3Config& config);

  int64_t length() const override { return length_; }
  const K3Config& config() const { return *config_; }
  KdaState& kda(int64_t layer) { return kda_[static_cast<size_t>(layer)]; }
  MlaCache& mla(int64_t layer) { return mla_[static_cast<size_t>(layer)]; }
  const MlaCache& mla(int64_t layer) const { return mla_[static_cast<size_t>(layer)]; }
  void advance(int64_t positions) { length_ += positions; }

  struct Snapshot {
    int64_t length = 0;
    std::vector<KdaState> kda;
  };
  // KDA state is copied (it is fixed-size); the MLA caches are only truncated on restore.
  Snapshot snapshot() const;
  void restore(const Snapshot& s);
  // Speculation's partial commit: KDA state back to `before`, MLA caches cut
  // to `length` (before.length <= length <= length()). The KDA rows between
  // the two are then replayed (K3Model::replay_kda) to reach `length` exactly.
  void rollback(const Snapshot& before, int64_t length);
  void reset();

  // Speculative verification's pass, from K3Model::forward_verify until
  // keep_verified (then freed: the KDA copy is as large as the session's
  // fixed state). It is the session's own, so passes of several sessions
  // can be verified and kept in any order; it is not part of the state: a
  // copy of the session starts without one (copying it would copy its log),
  // and snapshots and bytes() leave it out.
  struct Verification {
    Snapshot before;  // the session before the pass
    KdaLog log;       // its KDA steps
    size_t rows = 0;  // its rows; 0: no pass to keep
    Verification() = default;
    Verification(const Verification&) {}
    Verification& operator=(const Verification&) { return *this = Verification{}; }
    Verification(Verification&&) = default;
    Verification& operator=(Verification&&) = default;
  };
  Verification& verification() { return verification_; }

  uint64_t bytes() const override;
  void plan_length(int64_t positions) override;  // every MLA layer's latent rows

  // What a session of `positions` positions holds, without making one: the
  // fixed KDA state plus, per position, every MLA layer's latent row.
  // Admission (server) and the context default check requests against it.
  static uint64_t fixed_bytes(const K3Config& config);
  static uint64_t bytes_per_position(const K3Config& config);

private:
  void cut_mla(int64_t length);  // also sets length_

  const K3Config* config_;
  int64_t length_ = 0;
  std::vector<KdaState> kda_;  // indexed by layer; empty for MLA layers
  std::vector<MlaCache> mla_;  // indexed by layer; empty for KDA layers
  Verification verification_;
};

}  // namespace deltafin
