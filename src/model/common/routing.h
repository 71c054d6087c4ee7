// The routing rules of the MoE families: router logits of one position ->
// its Route (model/common/route.h), written into a Route that is reused, so
// routing a decoded token allocates nothing once the routes exist. The
// choice follows model/common/greedy.h's one rule (NaN last, ties to the
// lower id); weights are fp32, each step rounded, sums in the decided order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/common/route.h"

namespace deltafin {

// Scratch a router reuses between positions.
struct RouteScratch {
  std::vector<float> scores, choice;
  std::vector<int64_t> order;
};

// Qwen3-MoE (transformers' Qwen3MoeSparseMoeBlock): p = softmax(z) in fp32;
// the k experts of highest p; w_i = p_i, divided by their sum (added in the
// decided order) when `normalize` (norm_topk_prob).
void route_softmax_top_k(std::span<const float> z, size_t k, bool normalize, RouteScratch& scratch, Route& out);

// Kimi K3 (k3-model.md §7.7): s = sigmoid(z); the k experts of highest
// s + bias (the bias only chooses); w_i = s_i / (sum of the chosen s + 1e-20).
void route_sigmoid_bias_top_k(std::span<const float> z, std::span<const float> bias, size_t k, RouteScratch& scratch,
                              Route& out);

}  // namespace deltafin
