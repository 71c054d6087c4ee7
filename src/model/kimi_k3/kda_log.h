// What each KDA layer's recurrence consumed, row by row, during one forward
// pass: the raw convolution inputs and the exact step inputs (normalised q
// and k, v, decay g, beta). Speculative verification runs T rows but may
// commit only the first m; the KDA state cannot be un-stepped, so the session
// goes back to its pre-pass state and these m rows are stepped again
// (K3Model::replay_kda). Replaying the same inputs through the same kernels
// gives the same state bit for bit, without a second forward pass.
#pragma once

#include <cstddef>
#include <vector>

namespace deltafin {

struct KdaLayerLog {
  std::vector<float> raw_q, raw_k, raw_v;  // [T, D] projection outputs before the convolution
  std::vector<float> q, k, v, g;           // [T, D] what kda_step consumed
  std::vector<float> beta;                 // [T, H]
};

struct KdaLog {
  size_t rows = 0;                  // T of the logged pass
  std::vector<KdaLayerLog> layers;  // indexed by layer; empty for MLA layers
};

}  // namespace deltafin
