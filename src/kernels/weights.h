// A borrowed view of one weight matrix in any of the storage types the model
// uses (k3-model.md §4, §5.2). Logical shape [rows, cols], row-major, y = W x.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deltafin {

enum class WeightType { F32, BF16, Int8Row, MXFP4, FP8Block, Int4Group32 };

struct WeightView {
  WeightType type = WeightType::F32;
  size_t rows = 0, cols = 0;
  // F32: float[rows*cols]; BF16: uint16_t[rows*cols]; Int8Row: int8_t[rows*cols];
  // MXFP4: uint8_t packed[rows*cols/2] (low nibble = even column).
  const void* data = nullptr;
  // Int8Row: uint16_t IEEE-half scale per row; MXFP4: uint8_t e8m0 [rows*cols/32]
  // (row r, group g at r*cols/32 + g); unused otherwise.
  const void* scales = nullptr;
};

const char* weight_type_name(WeightType type);

// Bytes the matrix occupies (data plus scales): what a product streams.
size_t weight_bytes(const WeightView& w);

// Exact decode of one weight, straight from the definitions (tests, references):
// BF16 widened, Int8Row q * f32(f16 scale), MXFP4 ldexpf(e2m1, scale - 127).
float weight_at(const WeightView& w, size_t r, size_t c);

}  // namespace deltafin
