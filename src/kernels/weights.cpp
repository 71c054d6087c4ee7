#include "kernels/weights.h"

#include <cmath>

#include "util/numeric.h"

namespace deltafin {

const char* weight_type_name(WeightType type) {
  switch (type) {
    case WeightType::F32: return "f32";
    case WeightType::BF16: return "bf16";
    case WeightType::Int8Row: return "int8-row";
    case WeightType::MXFP4: return "mxfp4";
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
  }
  return 0.0f;
}

}  // namespace deltafin
