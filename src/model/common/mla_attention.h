// Multi-head latent attention (DeepSeek-V2's MLA) over a latent cache, the
// one implementation of the families that have it: Kimi K3 (NoPE, output
// gate, k3-model.md §7.4) and the DeepSeek-V3 family (interleaved RoPE on
// the rope part, optional query compression). Per position only the
// normalised latent c (r_kv floats) and k_r (d_rope) are cached.
//
// Absorbed form. Head h's key and value at position j are kv_b_proj of the
// latent: k_j = [W_k,h c_j ‖ k_r,j], v_j = W_v,h c_j. So
//   score_j = dot(q_h, k_j) = dot([W_k,h^T q_nope,h ‖ q_rope,h], [c_j ‖ k_r,j])
//   o_h     = sum_j p_j v_j = W_v,h (sum_j p_j c_j).
// Every reduction has one fixed order, whatever the pass width, slicing,
// thread count or ISA path: the absorbed query is a canonical product
// (kv_b_key_t), each score one canonical dot over r_kv + d_rope, the
// weighted sum acc = acc + p_j c_j over j ascending, and W_v,h u one
// canonical product. A row's result depends only on that row and the cache,
// so a T-position pass equals T one-position passes bit for bit. (It differs
// from the expanded form in the last bits — a re-association the exactness
// contract allows — and stays within tolerance of the families' float64
// references, which keep the expanded form.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "model/common/matrix.h"

namespace deltafin {

struct MlaWeights {
  // The query: q_b(rmsnorm(q_a x; q_a_norm)) with query compression (K3,
  // DeepSeek V3, K2), or q x without (q_lora_rank null); the unused ones empty.
  Matrix q_a, q_b, q;
  Matrix kv_a, kv_b, o;
  Matrix g;  // the output gate (K3): o ⊙ sigmoid(g x); empty: no gate
  std::vector<float> q_a_norm, kv_a_norm;
  // Derived at load (mla_derive): kv_b's key rows of each head, transposed —
  // row h*r_kv + c, column i holds kv_b[h*(d_nope+d_v) + i][c] — so the
  // absorbed query q_nope^T W_k is a plain product. The values are kv_b's
  // own, exactly: BF16 when kv_b is BF16 (a transpose changes no value), F32
  // otherwise (int8-row or FP8 decoded: q * scale).
  Matrix kv_b_key_t;
  // kv_b's value rows decoded to F32, [H * d_v, r_kv], only when kv_b is
  // block-scaled and a head's value rows do not start on a 128-row block
  // (test shapes; every release's do): empty otherwise, the product then
  // reads kv_b's rows in place.
  Matrix kv_b_values;
};

struct MlaDims {
  size_t heads = 0, nope = 0, rope = 0, dv = 0, rank = 0;
  float eps = 0;    // the q_a and kv_a RMSNorms'
  float scale = 0;  // applied to each score after the dot product
};

// Fills w.kv_b_key_t (and w.kv_b_values where needed) from w.kv_b; returns
// the bytes derived.
uint64_t mla_derive(MlaWeights& w, const MlaDims& dims);
// The derived bytes mla_derive adds for a kv_b of `type` (memory plans).
uint64_t mla_derived_bytes(const MlaDims& dims, WeightType kv_b_type);

// cos / sin [T, rope / 2] of the pass's positions for the rope part
// (interleaved pairs, Backend::rope_pairs); null for NoPE (K3: the "rope"
// part is used unrotated).
struct MlaRope {
  const Act* cos = nullptr;
  const Act* sin = nullptr;
};

// Rows x [T, hidden] at positions base ... base + T - 1: writes their latent
// rows into `cache` (which must hold base + T rows) and the attention output
// (after o_proj) into out [T, hidden]. `stop` as Backend::attention_latent's;
// false when it abandoned the op (cache rows written, out unspecified).
bool mla_attention(Backend& be, const MlaDims& dims, const MlaWeights& w, LatentLayer cache, int64_t base,
                   const Act& x, Act& out, MlaRope rope, const std::function<bool()>& stop);

}  // namespace deltafin
