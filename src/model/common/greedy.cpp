#include "model/common/greedy.h"

#include <algorithm>
#include <numeric>

namespace deltafin {

uint32_t argmax_first(const float* x, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (ranks_before(x[i], i, x[best], best)) best = i;
  return static_cast<uint32_t>(best);
}

void top_k_experts_into(const float* x, size_t n, size_t k, std::vector<int64_t>& order, std::vector<int64_t>& out) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  // ranks_before is a strict weak order even with NaNs, which partial_sort needs.
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), [&](int64_t a, int64_t b) {
    return ranks_before(x[a], static_cast<size_t>(a), x[b], static_cast<size_t>(b));
  });
  out.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
}

std::vector<int64_t> top_k_experts(const float* x, size_t n, size_t k) {
  // A fresh k-long vector: a pass keeps every row's route of every MoE layer
  // (last_routes), and a vector sized for n would keep n slots each (K3: 896
  // indices, 7 KB per row and layer, ~1.5 GB over a 2,300-row pass).
  std::vector<int64_t> order, out;
  top_k_experts_into(x, n, k, order, out);
  return out;
}

}  // namespace deltafin
