// An independent float64 reference forward pass of a K3-architecture model,
// written straight from k3-model.md §4-§7 (and §12 for how it is used): scalar,
// one position at a time, every weight widened exactly to double and every op
// done in double. It shares no code with the runtime's forward path or its
// kernels; readability wins over speed (it is meant for tiny/small checkpoints).
//
// Constants the spec defines as fp32 values (the MLA and KDA scales) are used as
// those fp32 values widened exactly; everything else (sigmoid, tanh, exp, sums)
// is plain double arithmetic in the order the spec writes it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "model/kimi_k3/checkpoint.h"

namespace deltafin::test {

struct ReferenceOptions {
  // [layer][position] -> the k expert ids in the decided order. When set, layers
  // 1..L-1 use these selections (and this order) instead of their own; the
  // weights are still sigma/(sum + 1e-20) of the reference's own uncorrected
  // sigmoid scores of those ids. Entry [0] (the dense layer) is ignored. Lets a
  // comparison hold the expert selection fixed (§12, last paragraph).
  const std::vector<std::vector<std::vector<int>>>* forced_routes = nullptr;
  // Keep every position's p (after attention: prefix + a, or a at a block
  // start) and h (after the layer) of every layer in the result (an error
  // study compares the fast path's layer by layer: tests/kimi_k3/margin_test.cpp).
  bool keep_states = false;
  // Round p and h to fp32 after every layer (then go on in double): the
  // rounding no fp32 pass can avoid, whatever its order, as a floor for its
  // error (tests/kimi_k3/margin_test.cpp).
  bool round_states = false;
};

struct ReferenceResult {
  std::vector<std::vector<double>> logits;            // [position][vocab]
  // [layer][position]: the ids used, in the decided order (the forced ones when
  // forced_routes is set). routes[0] is empty (size 0): layer 0 is dense.
  std::vector<std::vector<std::vector<int>>> routes;
  // [layer][position]: choice of the k-th best expert minus choice of the
  // (k+1)-th best (>= 0; +inf when k == E), from the reference's own scores even
  // when routes are forced. route_margins[0] is empty (size 0).
  std::vector<std::vector<double>> route_margins;
  std::vector<std::vector<double>> hidden_rms;        // [layer][position]: RMS of h after the layer
  // With keep_states, [layer][position] -> p after attention and h after the
  // layer (width hidden); empty otherwise.
  std::vector<std::vector<std::vector<double>>> after_attention, after_layer;
};

ReferenceResult reference_forward(const K3Checkpoint& ckpt, const std::vector<uint32_t>& tokens,
                                  const ReferenceOptions& opt = {});

// The single ops of the reference, exposed so tests can check them by hand.
namespace ref {

using Vec = std::vector<double>;

// Row-major [rows, cols] matrix of exactly widened weights.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  double at(int64_t r, int64_t c) const { return v[static_cast<size_t>(r * cols + c)]; }
};

Vec matvec(const Mat& w, const Vec& x);  // y[r] = sum_c W[r, c] x[c], c ascending
double sigmoid(double x);                // 1 / (1 + exp(-x))
double silu(double x);                   // x * sigmoid(x)
// SiTU(g, u) = [tanh(g/beta)*beta*sigmoid(g)] * [tanh(u/beta_lin)*beta_lin] (§7.6).
double situ(double g, double u, double beta, double beta_lin);
// RMSNorm (§7.1): out = w * (x / sqrt(mean(x^2) + eps)); an empty w means no weight.
Vec rms_norm(const Vec& x, const Vec& w, double eps);
// u / max(||u||_2, 1e-12) (§7.5 step 3).
Vec l2_normalize(const Vec& u);
// Mix([v_0..v_n], s) (§7.2): keys RMS-normalised without weight, score = dot(key, s),
// softmax, sum of alpha_j v_j over ascending j. s = w_norm * w_proj.
Vec mix(const std::vector<Vec>& vs, const Vec& s, double eps);
Vec softmax(const Vec& s);  // m = max; e = exp(s - m); e / sum e

// Top-k by descending choice, ties to the lower id, in that (decided) order (§7.7).
struct Selection {
  std::vector<int> ids;
  double margin = std::numeric_limits<double>::infinity();  // choice[k-th] - choice[(k+1)-th]
};
Selection select_experts(const Vec& choice, int64_t k);
// w_i = sigma[id_i] / (((sigma[id_0] + sigma[id_1]) + ...) + 1e-20).
Vec route_weights(const Vec& sigma, const std::vector<int>& ids);

// A routed-expert matrix [rows, cols] from its packed nibbles ([rows, cols/2],
// low nibble = even column) and e8m0 scales ([rows, cols/32]) via mxfp4_value (§4.2).
Mat decode_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols);

// Short causal depthwise conv + SiLU for one stream (§7.5 step 2). `history`
// holds the last kernel-1 raw inputs, oldest first (zeros at sequence start);
// w is [channels, kernel]; tap kernel-1 multiplies x. Updates history.
Vec short_conv_silu(std::vector<Vec>& history, const Mat& w, const Vec& x);

// One step of the gated delta rule for one head (§7.5 step 7). S is [K, K]
// indexed [k, v], row-major; q, k are already normalised (q already scaled);
// g is the per-key-row log decay. Returns the read-out o.
Vec kda_head_step(std::vector<double>& S, const Vec& q, const Vec& k, const Vec& v, double beta, const Vec& g);

// The layer walk and tail of §7.3 over one position, with the layer bodies and
// Mix operators supplied by the caller. Returns m, the tail Mix output.
struct LayerWalk {
  int64_t layers = 0, block = 0;
  // Mix over [A..., h] (attention side, not called while A is empty) and [A..., p].
  std::function<Vec(int64_t layer, const std::vector<Vec>& list)> mix_attn, mix_mlp;
  std::function<Vec(const std::vector<Vec>& list)> mix_out;
  // Attention_i(RMSNorm(x_attn; input_layernorm)) and MLP_i(RMSNorm(x_mlp; post_attention_layernorm)).
  std::function<Vec(int64_t layer, const Vec& x_attn)> attention, mlp;
  // Optional: p after layer i's attention, h after layer i (either may be
  // changed there: an error study rounds them).
  std::function<void(int64_t layer, Vec& p)> after_attention, after_layer;
};
Vec layer_walk(const LayerWalk& walk, const Vec& embedding);

}  // namespace ref
}  // namespace deltafin::test
