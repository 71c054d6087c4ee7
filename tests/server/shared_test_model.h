// One generated tiny K3 checkpoint per seed, loaded (all resident) once per
// test binary: generating and loading per test would dominate CI time.
#pragma once

#include <cstdint>

#include "model/kimi_k3/load/loaded_k3.h"

namespace deltafin::test {

LoadedK3& shared_tiny_model(uint64_t seed);

}  // namespace deltafin::test
