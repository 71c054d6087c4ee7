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

#include "model/common/matrix.h"
#include "model/qwen3/qwen3_config.h"
#include "model/qwen3/qwen3_session.h"
#include "util/thread_pool.h"

namespace deltafin {

struct Qwen3AttentionWeights {
  std::vector<float> input_norm;     // [hidden]
  std::vector<float> q_norm, k_norm;  // [head_dim], shared by all heads
  Matrix q, k, v, o;                  // [H*hd, hidden], [KV*hd, hidden] x2, [hidden, H*hd]
};

// RoPE of a config: per pair i the inverse frequency (double; YaRN-scaled
// when the config says so) and the factor cos and sin are multiplied by.
struct Qwen3Rope {
  std::vector<double> inv_freq;  // [head_dim / 2]
  double attention_factor = 1;
};
Qwen3Rope make_qwen3_rope(const Qwen3Config& config);

// cos and sin of positions start .. start + T - 1, [T, head_dim / 2] each:
// factor · cos(pos · inv_freq) in double, rounded once to fp32. They depend
// on the position only, never on T.
void qwen3_rope_tables(const Qwen3Rope& rope, int64_t start, size_t T, std::vector<float>& cos_t,
                       std::vector<float>& sin_t);

// Runs the attention half of `layer` for rows x [T, hidden] at positions
// start ... start + T - 1 (cos_t / sin_t are theirs), adding its output to x.
// The session must be reserved for them; their K/V rows are written here.
// `stop`, when set, is asked on the calling thread between blocks of
// kAttentionStopRows query rows (a long prompt's attention is minutes of
// work); when it returns true the block is abandoned and false is returned,
// x and the session's committed rows untouched. Blocking changes no bit:
// every (row, head) is its own reduction.
inline constexpr size_t kAttentionStopRows = 64;
bool qwen3_attention_block(const Qwen3Config& config, const Qwen3AttentionWeights& w, int64_t layer,
                           Qwen3Session& session, int64_t start, size_t T, const float* cos_t, const float* sin_t,
                           float* x, ThreadPool* pool, const std::function<bool()>& stop = {});

// Runs fn(begin, end) over [0, n), on the pool when there is one.
void qwen3_parallel(ThreadPool* pool, size_t n, const std::function<void(size_t, size_t)>& fn);

}  // namespace deltafin
