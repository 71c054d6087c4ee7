// Rotary position embeddings as the Hugging Face families define them, plain
// or YaRN-scaled, for every family that rotates (Qwen3, Qwen3-MoE, the
// DeepSeek-V3 family): the config's rope object parsed field by field, the
// per-pair inverse frequencies in double, and the cos / sin rows of a pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backend/backend.h"

namespace deltafin {

// YaRN RoPE scaling (rope_scaling / rope_parameters with rope_type "yarn"), as
// Hugging Face's _compute_yarn_parameters: per pair i of a rotated width d, with
// base frequency f_i = theta^(-2i/d), inv_freq_i = f_i/factor·(1 - m_i) + f_i·m_i,
// where m_i = 1 - clamp((i - low) / (high - low), 0, 1) and low/high the
// pairs whose wavelength spans original_max_position_embeddings / beta_fast
// and / beta_slow positions (floor/ceil when truncate); cos and sin are
// multiplied by attention_factor (default 0.1·ln(factor) + 1, or
// mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are set).
// Decision: `factor` is the file's factor. Transformers before 4.56 replaced
// it by max_position_embeddings / original_max_position_embeddings whenever
// the latter was present (huggingface/transformers#38224, fixed by #40320);
// vLLM, llama.cpp and current transformers use the file's factor, as here.
// beta_fast and beta_slow are always the file's when it gives them (Kimi K2
// sets both to 1; 32 / 1 are only the defaults).
struct YarnScaling {
  bool enabled = false;
  double factor = 1;
  int64_t original_max_position_embeddings = 0;  // the file's, else max_position_embeddings
  double beta_fast = 32, beta_slow = 1;
  double attention_factor = 1;  // resolved at parse
  bool truncate = true;
  // As the file gives them, 0 when absent: the DeepSeek-V3 family also
  // multiplies its softmax scale by mscale(factor, mscale_all_dim)^2.
  double mscale = 0, mscale_all_dim = 0;
};

// yarn_get_mscale: 0.1·m·ln(factor) + 1 for factor > 1, else 1.
double yarn_get_mscale(double factor, double m);

// A rope object of config.json (rope_scaling, or rope_parameters of newer
// transformers): "default" (plain) or "yarn"; every other key or type is
// refused naming `where`. *theta is set when the object carries rope_theta.
void parse_rope_object(const nlohmann::json& p, const std::string& where, int64_t max_position_embeddings,
                       YarnScaling& yarn, double* theta);

// The rotation of one rotated width: per pair i the inverse frequency
// (double; YaRN-scaled when enabled) and the factor cos and sin carry.
struct RopeFreqs {
  std::vector<double> inv_freq;  // [dim / 2]
  double attention_factor = 1;
};
RopeFreqs make_rope(int64_t dim, double theta, const YarnScaling& yarn);

// cos and sin of positions start .. start + T - 1, [T, dim / 2] each:
// factor · cos(pos · inv_freq) in double, rounded once to fp32. They depend
// on the position only, never on T.
void rope_tables(const RopeFreqs& rope, int64_t start, size_t T, std::vector<float>& cos_t, std::vector<float>& sin_t);

// The tables of one pass on a backend, reused from pass to pass.
struct RopeRows {
  std::vector<float> cos_host, sin_host;
  Act cos, sin;
  // Inline so that the parsing half of this file needs no backend (the
  // config fuzzer links rope.cpp alone).
  void fill(Backend& be, const RopeFreqs& rope, int64_t start, size_t T) {
    rope_tables(rope, start, T, cos_host, sin_host);
    const size_t half = rope.inv_freq.size();
    cos = be.act(T, half);
    sin = be.act(T, half);
    be.write(cos, 0, cos_host);
    be.write(sin, 0, sin_host);
  }
};

}  // namespace deltafin
