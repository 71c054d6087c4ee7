#include "kernels/weights.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

// e4m3fn from its definition (OCP 8-bit floating point, v1.0): sign, 4
// exponent bits with bias 7, 3 mantissa bits; exponent 0 is subnormal
// (m * 2^-9); S.1111.111 is NaN and there is no infinity.
float e4m3_from_definition(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), e - 10);
  return (code & 0x80) ? -v : v;
}

size_t blocks(size_t n) { return (n + kFp8BlockSize - 1) / kFp8BlockSize; }

}  // namespace

const char* weight_type_name(WeightType type) {
  switch (type) {
    case WeightType::F32: return "f32";
    case WeightType::BF16: return "bf16";
    case WeightType::Int8Row: return "int8-row";
    case WeightType::MXFP4: return "mxfp4";
    case WeightType::FP8Block: return "fp8-block";
    case WeightType::Int4Group32: return "int4-group32";
  }
  return "unknown";
}

size_t weight_bytes(const WeightView& w) {
  size_t n = w.rows * w.cols;
  switch (w.type) {
    case WeightType::F32: return n * 4;
    case WeightType::BF16: return n * 2;
    case WeightType::Int8Row: return n + w.rows * 2;
    case WeightType::MXFP4: return n / 2 + n / 32;
    case WeightType::FP8Block: return n + blocks(w.rows) * blocks(w.cols) * 4;
    case WeightType::Int4Group32: return n / 2 + n / 32 * 2;
  }
  return 0;
}

float weight_at(const WeightView& w, size_t r, size_t c) {
  size_t i = r * w.cols + c;
  switch (w.type) {
    case WeightType::F32: return static_cast<const float*>(w.data)[i];
    case WeightType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    case WeightType::Int8Row: {
      float q = static_cast<float>(static_cast<const int8_t*>(w.data)[i]);
      return q * f16_to_f32(static_cast<const uint16_t*>(w.scales)[r]);
    }
    case WeightType::MXFP4: {
      static const float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
      uint8_t byte = static_cast<const uint8_t*>(w.data)[i / 2];
      uint8_t nibble = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      uint8_t scale = static_cast<const uint8_t*>(w.scales)[i / 32];
      float v = std::ldexp(kMagnitude[nibble & 7], static_cast<int>(scale) - 127);
      return (nibble & 8) ? -v : v;
    }
    case WeightType::FP8Block: {
      const float value = e4m3_from_definition(static_cast<const uint8_t*>(w.data)[i]);
      const float scale = static_cast<const float*>(w.scales)[(r / kFp8BlockSize) * blocks(w.cols) + c / kFp8BlockSize];
      return value * scale;  // the one rounding of the definition
    }
    case WeightType::Int4Group32: {
      uint32_t word;
      std::memcpy(&word, static_cast<const uint8_t*>(w.data) + 4 * (i / 8), 4);
      const int q = static_cast<int>((word >> (4 * (c % 8))) & 15) - 8;
      return static_cast<float>(q) * bf16_to_f32(static_cast<const uint16_t*>(w.scales)[i / 32]);
    }
  }
  return 0.0f;
}

WeightView weight_rows(const WeightView& w, size_t first, size_t n) {
  if (first > w.rows || n > w.rows - first)
    fail("weight_rows: rows [", first, ", ", first + n, ") of a ", weight_type_name(w.type), " matrix [", w.rows, ", ",
         w.cols, "]");
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  const uint8_t* scales = static_cast<const uint8_t*>(w.scales);
  WeightView v = w;
  v.rows = n;
  v.key = 0;  // other bytes than the whole matrix's: not its identity
  switch (w.type) {
    case WeightType::F32: v.data = data + first * w.cols * 4; break;
    case WeightType::BF16: v.data = data + first * w.cols * 2; break;
    case WeightType::Int8Row:
      v.data = data + first * w.cols;
      v.scales = scales + first * 2;
      break;
    case WeightType::MXFP4:
      v.data = data + first * w.cols / 2;
      v.scales = scales + first * (w.cols / 32);
      break;
    case WeightType::FP8Block:
      if (first % kFp8BlockSize != 0)
        fail("weight_rows: a fp8-block matrix [", w.rows, ", ", w.cols, "] sliced from row ", first,
             ": a slice must start at a multiple of ", kFp8BlockSize, " rows (its scale blocks)");
      v.data = data + first * w.cols;
      v.scales = scales + first / kFp8BlockSize * blocks(w.cols) * 4;
      break;
    case WeightType::Int4Group32:
      v.data = data + first * w.cols / 2;
      v.scales = scales + first * (w.cols / 32) * 2;
      break;
  }
  return v;
}

}  // namespace deltafin
