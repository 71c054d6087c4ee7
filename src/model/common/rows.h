// Activations of a pass: T rows of width n, contiguous (row t is data() + t * n).
// Every family's forward pass works on these.
#pragma once

#include <cstddef>
#include <vector>

namespace deltafin {

struct Rows {
  size_t T = 0, n = 0;
  std::vector<float> v;
  Rows() = default;
  Rows(size_t T_, size_t n_) : T(T_), n(n_), v(T_ * n_, 0.0f) {}
  float* row(size_t t) { return v.data() + t * n; }
  const float* row(size_t t) const { return v.data() + t * n; }
};

}  // namespace deltafin
