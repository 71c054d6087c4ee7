// The experts one MoE layer chose for one position, in the decided order
// (descending choice score, ties to the lower id: model/common/greedy.h)
// with their weights. Every MoE family's router produces these; lookahead,
// statistics and tests read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace deltafin {

struct Route {
  std::vector<int64_t> experts;
  std::vector<float> weights;
};

// What one position's route of one MoE layer holds in memory: a pass keeps
// them for every MoE layer (last_routes), so the memory plan counts them
// per pass row. The two heap blocks each carry the allocator's header
// (16 B in glibc's malloc).
inline constexpr uint64_t route_bytes(int64_t top_k) {
  return static_cast<uint64_t>(top_k) * (sizeof(int64_t) + sizeof(float)) + sizeof(Route) + 2 * 16;
}

// Told every position's route as a pass computes it (route traces for cache
// studies: experts/route_trace.h). Called on the engine thread, in pass order:
// begin_pass once per forward pass, then each MoE layer's routes (a decoded
// token: one route per layer; a prefill slice: one per row, rows in order).
class RouteObserver {
public:
  virtual ~RouteObserver() = default;
  virtual void begin_pass(size_t positions) = 0;
  virtual void routes(int64_t layer, std::span<const Route> routes) = 0;
};

}  // namespace deltafin
