// The attention half of a Qwen3 layer, shared by the dense architecture
// (model/qwen3) and Qwen3-MoE (model/qwen3_moe), which differ only in the
// MLP half: x += o_proj(attn(rope(q_norm(q)), rope(k_norm(k)), v)) on
// rmsnorm(x; input_layernorm), grouped-query, causal over the session's
// fp32 K/V cache. Every position's arithmetic is the same whether it runs
// alone or among T positions, so T-position passes equal T one-position
// passes bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "model/common/kv_session.h"
#include "model/common/matrix.h"
#include "model/common/rope.h"
#include "model/qwen3/qwen3_config.h"

namespace deltafin {

struct Qwen3AttentionWeights {
  std::vector<float> input_norm;     // [hidden]
  std::vector<float> q_norm, k_norm;  // [head_dim], shared by all heads
  Matrix q, k, v, o;                  // [H*hd, hidden], [KV*hd, hidden] x2, [hidden, H*hd]
};

// RoPE of a config (model/common/rope.h): per pair i the inverse frequency
// (double; YaRN-scaled when the config says so) and the factor cos and sin
// are multiplied by; its tables are rope_tables' over head_dim.
using Qwen3Rope = RopeFreqs;
using Qwen3RopeRows = RopeRows;
inline Qwen3Rope make_qwen3_rope(const Qwen3Config& c) { return make_rope(c.head_dim, c.rope_theta, c.yarn); }

// Runs the attention half of `layer` for rows x [T, hidden] at positions
// start ... start + T - 1 (cos / sin [T, head_dim / 2] are theirs), adding
// its output to x. The session must be reserved for them; their K/V rows are
// written here. `stop`, when set, is asked between blocks of
// Backend::kAttentionStopRows query rows (a long prompt's attention is
// minutes of work); when it returns true the block is abandoned and false is
// returned, x and the session's committed rows untouched. Blocking changes
// no bit: every (row, head) is its own reduction.
inline constexpr size_t kAttentionStopRows = Backend::kAttentionStopRows;
bool qwen3_attention_block(Backend& be, const Qwen3Config& config, const Qwen3AttentionWeights& w, int64_t layer,
                           KvSession& session, int64_t start, const Act& cos, const Act& sin, Act& x,
                           const std::function<bool()>& stop = {});

// The RoPE tables of a pass as the backend's activations (host scratch reused).

}  // namespace deltafin
