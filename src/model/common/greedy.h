// The two selections every family makes, with one rule for NaN: a NaN score
// ranks below every number (it is never chosen while a number is left), and
// equal scores go to the lower index. Greedy decoding (argmax) and MoE
// routing (top-k) both follow it, so a NaN produced anywhere cannot make two
// families, two ISA paths or two batch shapes choose differently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deltafin {

// True when score a at index ia ranks before score b at index ib.
inline bool ranks_before(float a, size_t ia, float b, size_t ib) {
  const bool na = a != a, nb = b != b;  // NaN (no <cmath>: this header is included in hot loops)
  if (na != nb) return nb;
  if (!na && a != b) return a > b;
  return ia < ib;
}

// The index of the highest score (lowest index on ties; 0 when all are NaN). n >= 1.
uint32_t argmax_first(const float* scores, size_t n);

// The k indices of highest score in ranking order (k <= n).
std::vector<int64_t> top_k_experts(const float* scores, size_t n, size_t k);
// The same into `out`, with `order` as scratch: both keep their storage
// between calls, so a router that reuses them allocates nothing.
void top_k_experts_into(const float* scores, size_t n, size_t k, std::vector<int64_t>& order, std::vector<int64_t>& out);

}  // namespace deltafin
