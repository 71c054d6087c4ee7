#include "model/common/routing.h"

#include <algorithm>
#include <numeric>

#include "kernels/ops.h"
#include "model/common/greedy.h"
#include "util/error.h"

namespace deltafin {

namespace {

// out.experts = the k indices of highest score in ranking order, into the
// Route's own storage (greedy.h's top_k_experts without its allocations).
void choose(std::span<const float> x, size_t k, RouteScratch& s, Route& out) {
  if (k == 0 || k > x.size()) fail("routing: top ", k, " of ", x.size(), " experts");
  s.order.resize(x.size());
  std::iota(s.order.begin(), s.order.end(), 0);
  std::partial_sort(s.order.begin(), s.order.begin() + static_cast<std::ptrdiff_t>(k), s.order.end(),
                    [&](int64_t a, int64_t b) {
                      return ranks_before(x[static_cast<size_t>(a)], static_cast<size_t>(a), x[static_cast<size_t>(b)],
                                          static_cast<size_t>(b));
                    });
  out.experts.assign(s.order.begin(), s.order.begin() + static_cast<std::ptrdiff_t>(k));
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
