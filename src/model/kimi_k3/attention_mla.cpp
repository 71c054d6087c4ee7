// K3's gated NoPE MLA (k3-model.md §7.4) is the shared MLA block
// (model/common/mla_attention.h) with no RoPE (the "rope" part of q and k is
// used unrotated) and the output gate; per position only the normalised
// latent c and k_r are kept — 2,304 bytes per position for K3 instead of
// 120 KiB of expanded keys and values. The float64 reference keeps the
// expanded form: tests/kimi_k3/reference_k3.cpp.
#include "model/kimi_k3/model.h"
#include "util/error.h"

namespace deltafin {

void K3Model::attention_mla(int64_t layer, K3Session& s, const Act& x, Act& out, size_t offset) {
  const MlaDims dims = k3_mla_dims(c_);
  MlaCache& cache = s.mla(layer);
  const size_t R = dims.rank + dims.rope;
  // Append the T new positions: [RMSNorm(c_lat) ‖ k_r].
  const size_t base = static_cast<size_t>(s.length()) + offset;
  if (cache.latent.size() != base * R)
    fail("attention_mla: layer ", layer, " cache holds ", cache.latent.size() / R, " positions, expected ", base);
  cache.latent.resize((base + x.rows()) * R);
  const LatentLayer latent{cache.latent.data(), dims.rank, dims.rope};
  if (!mla_attention(be_, dims, w_.layers[static_cast<size_t>(layer)].mla, latent, static_cast<int64_t>(base), x, out,
                     MlaRope{}, pass_->poll()))
    stop_if_cancelled();
}

}  // namespace deltafin
