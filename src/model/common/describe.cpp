#include "model/common/describe.h"

#include <cstdio>

#include "util/progress.h"

namespace deltafin {

void print_session_figures(uint64_t fixed, uint64_t per_position, int64_t max_positions, const char* what) {
  std::printf("  session: %s fixed + %llu B per position (%s)", human_bytes(static_cast<double>(fixed)).c_str(),
              static_cast<unsigned long long>(per_position), what);
  for (int64_t n : {int64_t{32768}, int64_t{131072}, int64_t{1} << 20})
    std::printf("; %lldk: %s", static_cast<long long>(n / 1024),
                human_bytes(static_cast<double>(fixed + per_position * static_cast<uint64_t>(n))).c_str());
  std::printf(" (config's context %lld)\n", static_cast<long long>(max_positions));
}

}  // namespace deltafin
