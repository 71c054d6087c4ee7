// A borrowed view of one weight matrix in any of the storage types the model
// uses (k3-model.md §4, §5.2). Logical shape [rows, cols], row-major, y = W x.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deltafin {

enum class WeightType { F32, BF16, Int8Row, MXFP4, FP8Block, Int4Group32 };

// FP8Block's scales cover blocks of this many rows x columns (DeepSeek V3's
// weight_block_size [128, 128]).
inline constexpr size_t kFp8BlockSize = 128;

struct WeightView {
  WeightType type = WeightType::F32;
  size_t rows = 0, cols = 0;
  // F32: float[rows*cols]; BF16: uint16_t[rows*cols]; Int8Row: int8_t[rows*cols];
  // MXFP4: uint8_t packed[rows*cols/2] (low nibble = even column);
  // FP8Block: uint8_t e4m3fn codes [rows*cols];
  // Int4Group32: uint32_t words [rows*cols/8] as compressed-tensors'
  // pack-quantized writes them: column 8j+k of a row is nibble k (bits
  // 4k..4k+3) of the row's word j, and nibble u is the value u - 8.
  const void* data = nullptr;
  // Int8Row: uint16_t IEEE-half scale per row; MXFP4: uint8_t e8m0 [rows*cols/32]
  // (row r, group g at r*cols/32 + g); FP8Block: float [ceil(rows/128) *
  // ceil(cols/128)] (weight_scale_inv, block (r/128, c/128) at
  // (r/128)*ceil(cols/128) + c/128); Int4Group32: uint16_t bf16 [rows*cols/32]
  // (weight_scale, row r, group g at r*cols/32 + g); unused otherwise.
  const void* scales = nullptr;
  // An identity of the bytes, or 0 for none: two views with the same nonzero
  // key have the same type, shape and bytes, now and later. The routed
  // experts block sets it per expert tensor (model/common/routed_experts.h
  // expert_weight_key), so a device backend can keep an expert in its own
  // memory whatever RAM slot the record sits in next time. Products ignore it.
  uint64_t key = 0;
};

const char* weight_type_name(WeightType type);

// Bytes the matrix occupies (data plus scales): what a product streams.
size_t weight_bytes(const WeightView& w);

// Exact decode of one weight, straight from the definitions (tests, references):
// BF16 widened, Int8Row q * f32(f16 scale), MXFP4 ldexpf(e2m1, scale - 127),
// FP8Block f32(e4m3) * scale (one fp32 multiply, rounded to nearest even),
// Int4Group32 (u - 8) * f32(bf16 scale) (exact).
float weight_at(const WeightView& w, size_t r, size_t c);

// Rows [first, first + n) of w as a view of their own (its data and scales
// pointers moved to row `first`), whose products are those rows of w's,
// bit for bit. An FP8Block view must start at a multiple of 128 rows: its
// scales are per 128 x 128 block, shared by the rows of a block, so a view
// from inside one would take the next block's scales. Error for that and
// for rows past the end, naming the type and shape.
WeightView weight_rows(const WeightView& w, size_t first, size_t n);

}  // namespace deltafin
