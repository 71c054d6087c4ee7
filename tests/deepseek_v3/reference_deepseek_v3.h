// An independent float64 forward pass of the DeepSeek-V3 family
// (DeepseekV3ForCausalLM: DeepSeek V3 / R1 / V3.1, Kimi K2 / K2-Thinking),
// written from the definitions (transformers' modeling_deepseek_v3.py and
// modeling_rope_utils.py's _compute_yarn_parameters, DeepSeek's
// inference/model.py and kernel.py, compressed-tensors' pack_quantized,
// vLLM's deepseek_mtp.py for the MTP module) with plain loops, no cache and
// nothing of the runtime: it reads config.json and the safetensors shards
// itself (format/safetensors.h only for the raw bytes, dtypes and shapes)
// and decodes BF16, F32, FP8 e4m3 with F32 block scales and INT4
// pack-quantized weights to double with its own code.
//
// Attention is MLA in its plain ("naive") form: per head the query [nope |
// rope], keys [k_nope | k_pe] expanded from the latent, values from the
// latent, causal softmax. RoPE is applied interleaved (HF rope_interleave),
// with YaRN from rope_scaling. Routed experts are summed in expert-id order,
// as transformers does. Routing follows DeepSeek's Gate: experts of dropped
// groups are out of the choice (-inf; transformers fills 0.0, which differs
// only when fewer than top_k kept experts have score + bias > 0: every route
// says whether that happened).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deltafin::test {

// ---- the pieces, exposed for the hand-computed tests -------------------------

// rope_scaling as _compute_yarn_parameters reads it (enabled: type "yarn").
struct DsYarn {
  bool enabled = false;
  double theta = 10000, factor = 1, original_max_positions = 4096;
  double beta_fast = 32, beta_slow = 1;
  double mscale = 0, mscale_all_dim = 0;  // 0: absent
  std::optional<double> attention_factor;
  bool truncate = true;
};
// The inverse frequency of each of the dim/2 rotated pairs.
std::vector<double> dsv3_inv_freq(int dim, const DsYarn& yarn);
// The factor on cos and sin (HF's attention_scaling).
double dsv3_rope_attention_factor(const DsYarn& yarn);
// qk_head_dim^-0.5, times yarn_get_mscale(factor, mscale_all_dim)^2 when set.
double dsv3_softmax_scale(int qk_head_dim, const DsYarn& yarn);
// HF's apply_rotary_pos_emb_interleave on one rope vector x (dim = 2 *
// inv_freq.size()) at position pos: pair (x[2i], x[2i+1]) rotated by
// pos * inv_freq[i], written as [rotated evens | rotated odds], times the
// attention factor.
std::vector<double> dsv3_rope_interleaved(const std::vector<double>& x, const std::vector<double>& inv_freq,
                                          double attention_factor, double pos);

struct DsRouting {
  int n_group = 1, topk_group = 1, top_k = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1;
};
struct DsRoute {
  std::vector<int> experts;        // by choice (score + bias), highest first; ties to the lower id
  std::vector<double> weights;     // the chosen experts' scores, normalised, times routed_scaling_factor
  std::vector<int> kept_groups;    // ascending
  bool hf_zero_fill_differs = false;  // transformers' 0.0 fill would have chosen differently
};
// noaux_tc routing of one token: `scores` are the sigmoid scores, `bias`
// the e_score_correction_bias.
DsRoute dsv3_route(const std::vector<double>& scores, const std::vector<double>& bias, const DsRouting& routing);

// float8_e4m3fn: bias 7, subnormals m * 2^-9, no infinity; NaN for 0x7F and 0xFF.
double dsv3_e4m3_value(uint8_t code);
// compressed-tensors unpack_from_int32 for 4 bits along a row: the value of
// column c is nibble c % 8 (from the low bits) of word c / 8, minus 8.
std::vector<int> dsv3_unpack_int4_row(const int32_t* words, int64_t cols);

// ---- the model ------------------------------------------------------------------

class ReferenceDeepseekV3 {
public:
  explicit ReferenceDeepseekV3(const std::string& checkpoint_dir);
  ~ReferenceDeepseekV3();

  struct Pass {
    std::vector<double> logits;  // [T, vocab]
    std::vector<double> hidden;  // [T, hidden]: the last hidden state after model.norm (what the MTP module takes)
    // routes[m][t]: the route of position t in the m-th MoE layer (layer first_k_dense_replace + m)
    std::vector<std::vector<DsRoute>> routes;
  };
  // Every position of `tokens` (positions 0 .. T-1).
  Pass forward(const std::vector<uint32_t>& tokens) const;
  std::vector<double> logits(const std::vector<uint32_t>& tokens) const { return forward(tokens).logits; }

  // The MTP module (layer num_hidden_layers; vLLM's DeepSeekMultiTokenPredictorLayer):
  // row i pairs hidden[i] (a main-model hidden state after model.norm, at
  // position start_position + i) with tokens[i] (the token after it);
  // e = embed_tokens(token), zeroed at position 0; x = eh_proj([enorm(e) |
  // hnorm(h)]); the MTP decoder layer over the rows (causal, its own
  // attention); logits = shared_head.head(shared_head.norm(x)). [T, vocab].
  std::vector<double> mtp_logits(const std::vector<double>& hidden, const std::vector<uint32_t>& tokens,
                                 int64_t start_position = 0, std::vector<DsRoute>* routes = nullptr) const;

  int64_t vocab() const { return vocab_; }
  int64_t hidden_size() const { return hidden_; }
  int64_t layers() const { return layers_; }
  bool has_mtp() const { return mtp_ > 0; }
  const DsYarn& yarn() const { return yarn_; }

private:
  struct Matrix {
    int64_t rows = 0, cols = 0;
    std::vector<double> w;  // row-major
  };
  class Tensors;

  const Matrix& matrix(const std::string& base) const;       // base.weight, FP8 + scale_inv, or INT4 packed
  const std::vector<double>& vec(const std::string& name) const;  // a 1-D BF16 or F32 tensor
  std::vector<double> apply(const std::string& base, const std::vector<double>& x) const;
  std::vector<double> norm(const std::string& weight, const std::vector<double>& x) const;

  std::vector<std::vector<double>> decoder_layer(int64_t layer, const std::vector<std::vector<double>>& x,
                                                 int64_t start, std::vector<DsRoute>* routes) const;
  std::vector<std::vector<double>> attention(const std::string& prefix, const std::vector<std::vector<double>>& y,
                                             int64_t start) const;
  std::vector<double> mlp(const std::string& prefix, const std::vector<double>& y) const;
  std::vector<double> moe(const std::string& prefix, const std::vector<double>& y, DsRoute* route) const;
  bool is_moe(int64_t layer) const;

  std::unique_ptr<Tensors> tensors_;
  int64_t hidden_ = 0, layers_ = 0, heads_ = 0, q_lora_ = 0, kv_lora_ = 0, nope_ = 0, rope_ = 0, v_dim_ = 0;
  int64_t intermediate_ = 0, moe_intermediate_ = 0, experts_ = 0, shared_ = 0, vocab_ = 0;
  int64_t first_dense_ = 0, moe_freq_ = 1, mtp_ = 0;
  int64_t fp8_block_rows_ = 128, fp8_block_cols_ = 128, int4_group_ = 32;
  double eps_ = 1e-6;
  DsRouting routing_;
  DsYarn yarn_;
  std::vector<double> inv_freq_;
  double rope_factor_ = 1, softmax_scale_ = 1;
  bool tied_ = false;
  mutable std::map<std::string, Matrix> matrices_;
  mutable std::map<std::string, std::vector<double>> vectors_;
};

}  // namespace deltafin::test
