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
  std::vector<float> scores, choice, group_scores;
  std::vector<int64_t> order, groups;
};

// Qwen3-MoE (transformers' Qwen3MoeSparseMoeBlock): p = softmax(z) in fp32;
// the k experts of highest p; w_i = p_i, divided by their sum (added in the
// decided order) when `normalize` (norm_topk_prob).
void route_softmax_top_k(std::span<const float> z, size_t k, bool normalize, RouteScratch& scratch, Route& out);

// Kimi K3 (k3-model.md §7.7): s = sigmoid(z); the k experts of highest
// s + bias (the bias only chooses); w_i = s_i / (sum of the chosen s + 1e-20).
void route_sigmoid_bias_top_k(std::span<const float> z, std::span<const float> bias, size_t k, RouteScratch& scratch,
                              Route& out);

// The DeepSeek-V3 family (noaux_tc): s = sigmoid(z), c = s + bias (the
// bias only chooses). With n_group > 1 the experts form n_group equal
// groups, each scored by the sum of its two highest c (top1 + top2), and
// only the topk_group best groups (ties to the lower group) stay eligible.
// The k eligible experts of highest c; w_i = s_i, divided by (their sum in
// the decided order + 1e-20) when `normalize` (norm_topk_prob), then times
// `scale` (routed_scaling_factor), each step rounded to fp32.
// Decision: experts of dropped groups are out of the choice, as DeepSeek's
// inference/model.py masks them (-inf). Hugging Face's DeepseekV3MoE fills
// them with 0.0 instead, which differs only when fewer than k eligible
// experts have c > 0 (a bias below -1 on most of the kept groups' experts);
// the release's own code is the reference here.
struct GroupedRouting {
  size_t k = 0, n_group = 1, topk_group = 1;
  bool normalize = true;
  float scale = 1;
};
void route_sigmoid_grouped_top_k(std::span<const float> z, std::span<const float> bias, const GroupedRouting& rule,
                                 RouteScratch& scratch, Route& out);

}  // namespace deltafin
