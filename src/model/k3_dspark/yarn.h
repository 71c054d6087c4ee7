// YaRN rotary embedding of the DSpark draft model (k3-model.md §10.2): the
// per-pair inverse frequencies, the attention scale with its mscale² factor
// and the rotation of interleaved pairs. The target K3 has no positional
// encoding at all; only the drafter rotates.
#pragma once

#include <cstdint>
#include <vector>

#include "model/k3_dspark/config.h"

namespace deltafin {

// yarn_get_mscale: 0.1·m·ln(factor) + 1 for factor > 1, else 1.
double yarn_mscale(double factor, double m);

struct DSparkYarn {
  int64_t dim = 0;                // qk_rope_head_dim (64)
  int64_t low = 0;                // max(floor(corr(beta_fast)), 0)      (15 for the real config)
  double high = 0;                // min(ceil(corr(beta_slow)), dim - 1) (26), +0.001 if equal to low
  std::vector<float> inv_freq;    // [dim / 2], computed in double, rounded once to fp32
  float attention_scale = 0;      // (nope + rope)^-0.5 · mscale(factor, mscale_all_dim)², rounded once
  float cos_sin_scale = 1;        // mscale(factor, mscale) / mscale(factor, mscale_all_dim) (1 for K3's)
};

// corr(β) = dim·ln(L0 / (β·2π)) / (2·ln θ): the pair index whose wavelength
// spans L0/β positions (exposed for tests).
double yarn_correction_dim(double beta, int64_t dim, double theta, int64_t original_max_positions);

DSparkYarn make_dspark_yarn(const DSparkConfig& config);

// Rotates x[0 .. dim) in place at `position`: for each pair i, (e, o) =
// (x[2i], x[2i+1]), phase = (float)position · inv_freq_i in fp32,
// c = cosf(phase)·cos_sin_scale, s = sinf(phase)·cos_sin_scale,
// (e, o) -> (e·c − o·s, o·c + e·s) in fp32, each result rounded to BF16.
void yarn_rotate(const DSparkYarn& yarn, int64_t position, float* x);

}  // namespace deltafin
