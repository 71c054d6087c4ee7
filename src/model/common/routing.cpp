#include "model/common/routing.h"

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

}  // namespace deltafin
