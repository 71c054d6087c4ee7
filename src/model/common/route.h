// The experts one MoE layer chose for one position, in the decided order
// (descending choice score, ties to the lower id: model/common/greedy.h)
// with their weights. Every MoE family's router produces these; lookahead,
// statistics and tests read them.
#pragma once

#include <cstdint>
#include <vector>

namespace deltafin {

struct Route {
  std::vector<int64_t> experts;
  std::vector<float> weights;
};

}  // namespace deltafin
