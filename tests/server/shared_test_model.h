// One generated tiny K3 checkpoint per seed, loaded (all resident) once per
// test binary: generating and loading per test would dominate CI time.
#pragma once

#include <cstdint>

#include "engine/loaded_model.h"

namespace deltafin::test {

LoadedK3& shared_tiny_model(uint64_t seed);

}  // namespace deltafin::test
