#include "experts/prefetch_gate.h"

#include <cmath>

namespace deltafin {

size_t idle_window_reads(double idle_s, double bytes_per_s, uint64_t expert_bytes) {
  if (!(idle_s > 0) || !(bytes_per_s > 0) || expert_bytes == 0) return 0;
  return static_cast<size_t>(std::floor(idle_s * bytes_per_s / static_cast<double>(expert_bytes)));
}

std::vector<int64_t> within_read_budget(std::span<const int64_t> experts, size_t budget,
                                        const std::function<bool(int64_t)>& in_ram, size_t* dropped) {
  std::vector<int64_t> kept;
  size_t reads = 0;
  *dropped = 0;
  for (int64_t e : experts) {
    const bool costs = !in_ram(e);
    if (costs && reads == budget) {
      ++*dropped;
      continue;
    }
    reads += costs;
    kept.push_back(e);
  }
  return kept;
}

double ema_step(double ema, double sample, double alpha) { return ema < 0 ? sample : ema + alpha * (sample - ema); }

}  // namespace deltafin
