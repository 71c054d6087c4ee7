// An owned weight matrix in its stored type, for every family's resident
// weights: view() hands the kernels (kernels/weights.h) a pointer into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/weights.h"
#include "util/weight_memory.h"

namespace deltafin {

// Int8Row matrices keep their f16 row scales in `scales` (k3-model.md §5.2);
// other types leave it empty.
struct Matrix {
  WeightType type = WeightType::BF16;
  size_t rows = 0, cols = 0;
  WeightBytes storage;  // huge-page backed where large (util/weight_memory.h)
  std::vector<uint8_t> scales;
  WeightView view() const {
    return WeightView{type, rows, cols, storage.data(), scales.empty() ? nullptr : scales.data()};
  }
  uint64_t bytes() const { return storage.size() + scales.size(); }
  // The BF16 bits of element (r, c); only for BF16 matrices (embedding lookups).
  uint16_t bf16_at(size_t r, size_t c) const {
    const uint8_t* p = storage.data() + (r * cols + c) * 2;
    return static_cast<uint16_t>(p[0] | (p[1] << 8));  // little-endian, as safetensors stores it
  }
};

}  // namespace deltafin
