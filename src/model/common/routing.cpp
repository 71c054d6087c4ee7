#include "model/common/routing.h"

#include <limits>

#include "kernels/ops.h"
#include "model/common/greedy.h"
#include "util/error.h"

namespace deltafin {

namespace {

// out.experts = the k indices of highest score in ranking order, into the
// Route's own storage.
void choose(std::span<const float> x, size_t k, RouteScratch& s, Route& out) {
  if (k == 0 || k > x.size()) fail("routing: top ", k, " of ", x.size(), " experts");
  top_k_experts_into(x.data(), x.size(), k, s.order, out.experts);
}

}  // namespace

void route_softmax_top_k(std::span<const float> z, size_t k, bool normalize, RouteScratch& s, Route& out) {
  s.scores.assign(z.begin(), z.end());
  softmax(s.scores.data(), s.scores.size());
  choose(s.scores, k, s, out);
  out.weights.clear();
  for (int64_t e : out.experts) out.weights.push_back(s.scores[static_cast<size_t>(e)]);
  if (!normalize) return;
  float den = 0.0f;
  for (float w : out.weights) den = den + w;
  for (float& w : out.weights) w = w / den;
}

void route_sigmoid_bias_top_k(std::span<const float> z, std::span<const float> bias, size_t k, RouteScratch& s,
                              Route& out) {
  const size_t E = z.size();
  if (bias.size() != E) fail("routing: ", bias.size(), " bias values for ", E, " experts");
  s.scores.resize(E);
  s.choice.resize(E);
  for (size_t e = 0; e < E; ++e) {
    s.scores[e] = sigmoid(z[e]);
    s.choice[e] = s.scores[e] + bias[e];
  }
  choose(s.choice, k, s, out);
  float den = 0.0f;
  for (int64_t e : out.experts) den = den + s.scores[static_cast<size_t>(e)];
  den = den + 1e-20f;
  out.weights.clear();
  for (int64_t e : out.experts) out.weights.push_back(s.scores[static_cast<size_t>(e)] / den);
}

namespace {

// Sum of the two highest values of a group, top1 + top2 (NaN never counts as
// higher, so a group's NaNs come last as in greedy.h's rule).
float top2_sum(const float* c, size_t n) {
  float a = -std::numeric_limits<float>::infinity(), b = a;
  for (size_t i = 0; i < n; ++i) {
    if (c[i] > a) {
      b = a;
      a = c[i];
    } else if (c[i] > b) {
      b = c[i];
    }
  }
  return a + b;
}

}  // namespace

void route_sigmoid_grouped_top_k(std::span<const float> z, std::span<const float> bias, const GroupedRouting& r,
                                 RouteScratch& s, Route& out) {
  const size_t E = z.size();
  if (bias.size() != E) fail("routing: ", bias.size(), " bias values for ", E, " experts");
  if (r.n_group == 0 || E % r.n_group != 0 || r.topk_group == 0 || r.topk_group > r.n_group)
    fail("routing: ", E, " experts in ", r.n_group, " groups, ", r.topk_group, " kept");
  s.scores.resize(E);
  s.choice.resize(E);
  for (size_t e = 0; e < E; ++e) {
    s.scores[e] = sigmoid(z[e]);
    s.choice[e] = s.scores[e] + bias[e];
  }
  if (r.n_group > 1 && r.topk_group < r.n_group) {
    const size_t per = E / r.n_group;
    s.group_scores.resize(r.n_group);
    for (size_t g = 0; g < r.n_group; ++g) s.group_scores[g] = top2_sum(s.choice.data() + g * per, per);
    top_k_experts_into(s.group_scores.data(), r.n_group, r.topk_group, s.order, s.groups);
    // Keep the chosen groups' choices; the others leave the choice (-inf).
    s.group_scores.assign(r.n_group, 0.0f);
    for (int64_t g : s.groups) s.group_scores[static_cast<size_t>(g)] = 1.0f;
    for (size_t e = 0; e < E; ++e)
      if (s.group_scores[e / per] == 0.0f) s.choice[e] = -std::numeric_limits<float>::infinity();
  }
  choose(s.choice, r.k, s, out);
  out.weights.clear();
  for (int64_t e : out.experts) out.weights.push_back(s.scores[static_cast<size_t>(e)]);
  if (r.normalize) {
    float den = 0.0f;
    for (float w : out.weights) den = den + w;
    den = den + 1e-20f;
    for (float& w : out.weights) w = w / den;
  }
  for (float& w : out.weights) w = w * r.scale;
}

}  // namespace deltafin
