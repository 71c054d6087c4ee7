// Spine files (design.md §3): one per layer plus one for the globals, each a
// small header naming its tensors followed by 4 KiB-aligned payloads, so they
// can be read with direct I/O or mapped. An int8-row spine (k3-model.md §5.2)
// stores each target matrix as I8 data plus an F16 row-scale tensor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/common/matrix.h"
#include "model/common/spine_source.h"
#include "store/store_manifest.h"

namespace deltafin {

// §5.2 row quantisation of a BF16 matrix: int8 data and f16 scales. Throws
// naming `name` and the row on a non-finite value.
Matrix quantize_int8_row(const std::string& name, const Matrix& bf16);

// The same, for `rows` rows of a larger matrix (setup streams big tensors in
// blocks): bf16 is little-endian [rows, cols], row0 the first row's index (for
// messages); writes q [rows, cols] and the f16 scale bit patterns.
void quantize_int8_rows(const std::string& name, size_t row0, size_t rows, size_t cols, const uint8_t* bf16,
                        int8_t* q, uint16_t* scales);

// Spine tensors from a store's spine/ files (the engine's resident path).
std::unique_ptr<SpineTensorSource> open_store_spine(const std::string& store_dir, const StoreManifest& m);

}  // namespace deltafin
