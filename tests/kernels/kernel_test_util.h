// Shared helpers for the kernel tests: random inputs, weight builders, float64
// references and the list of ISA paths this CPU can run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/isa.h"
#include "kernels/weights.h"
#include "util/numeric.h"
#include "util/rng.h"

namespace deltafin::test {

// Every path the CPU supports, scalar first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas)
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

// Sets the active path for one scope and restores the previous one.
class IsaScope {
public:
  explicit IsaScope(Isa isa) : saved_(active_isa()) { set_active_isa(isa); }
  ~IsaScope() { set_active_isa(saved_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

private:
  Isa saved_;
};

inline std::vector<float> random_floats(Rng& rng, size_t n, double scale = 1.0) {
  std::vector<float> v(n);
  for (float& f : v) f = static_cast<float>(rng.normal() * scale);
  return v;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// ||a - ref|| / ||ref|| in float64.
inline double rel_l2(const std::vector<float>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

inline double rel_err(float a, double ref) { return std::fabs(static_cast<double>(a) - ref) / std::fabs(ref); }

// A weight matrix with owned storage; view() borrows it.
struct OwnedWeight {
  WeightType type = WeightType::F32;
  size_t rows = 0, cols = 0;
  std::vector<uint8_t> data, scales;

  WeightView view() const {
    WeightView w;
    w.type = type;
    w.rows = rows;
    w.cols = cols;
    w.data = data.data();
    w.scales = scales.empty() ? nullptr : scales.data();
    return w;
  }
};

// A random scale whose biased exponent field (the top byte of its fp32 or
// bf16 bits after the sign) is drawn from [lo, hi], mantissa random: field 0
// is subnormal, 127 is [1, 2).
inline uint32_t random_scale_bits(Rng& rng, int lo, int hi) {
  const uint32_t exponent = static_cast<uint32_t>(lo + static_cast<int>(rng.below(static_cast<uint64_t>(hi - lo + 1))));
  uint32_t mantissa = static_cast<uint32_t>(rng.below(uint64_t{1} << 23));
  if (exponent == 0 && mantissa == 0) mantissa = 1;  // a scale must be > 0
  return exponent << 23 | mantissa;
}

// Random weights of each type. MXFP4 scale bytes are drawn from
// [scale_lo, scale_hi]; random packed bytes cover every e2m1 code. FP8Block
// and Int4Group32 scales (fp32 and bf16) take their exponent field from the
// same range, so (0, ...) reaches subnormal scales; FP8Block codes cover
// every e4m3 code except the two NaNs, Int4Group32 nibbles every value.
inline OwnedWeight random_weight(Rng& rng, WeightType type, size_t rows, size_t cols, int scale_lo = 118,
                                 int scale_hi = 130) {
  OwnedWeight w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  size_t n = rows * cols;
  switch (type) {
    case WeightType::F32: {
      w.data.resize(n * 4);
      for (size_t i = 0; i < n; ++i) {
        float f = static_cast<float>(rng.normal());
        std::memcpy(w.data.data() + 4 * i, &f, 4);
      }
      break;
    }
    case WeightType::BF16: {
      w.data.resize(n * 2);
      for (size_t i = 0; i < n; ++i) {
        uint16_t b = f32_to_bf16(static_cast<float>(rng.normal()));
        std::memcpy(w.data.data() + 2 * i, &b, 2);
      }
      break;
    }
    case WeightType::Int8Row: {
      w.data.resize(n);
      for (size_t i = 0; i < n; ++i) w.data[i] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(rng.below(255)) - 127));
      w.scales.resize(rows * 2);
      for (size_t r = 0; r < rows; ++r) {
        uint16_t h = f32_to_f16(static_cast<float>(0.001 + 0.02 * rng.uniform()));
        std::memcpy(w.scales.data() + 2 * r, &h, 2);
      }
      break;
    }
    case WeightType::MXFP4: {
      w.data.resize(n / 2);
      for (uint8_t& b : w.data) b = static_cast<uint8_t>(rng.below(256));
      w.scales.resize(n / 32);
      for (uint8_t& s : w.scales) s = static_cast<uint8_t>(scale_lo + static_cast<int>(rng.below(scale_hi - scale_lo + 1)));
      break;
    }
    case WeightType::FP8Block: {
      w.data.resize(n);
      for (uint8_t& b : w.data) {
        do b = static_cast<uint8_t>(rng.below(256));
        while ((b & 0x7F) == 0x7F);
      }
      const size_t blocks = ((rows + kFp8BlockSize - 1) / kFp8BlockSize) * ((cols + kFp8BlockSize - 1) / kFp8BlockSize);
      w.scales.resize(blocks * 4);
      for (size_t i = 0; i < blocks; ++i) {
        const uint32_t bits = random_scale_bits(rng, scale_lo, scale_hi);
        std::memcpy(w.scales.data() + 4 * i, &bits, 4);
      }
      break;
    }
    case WeightType::Int4Group32: {
      w.data.resize(n / 2);
      for (uint8_t& b : w.data) b = static_cast<uint8_t>(rng.below(256));
      w.scales.resize(n / 32 * 2);
      for (size_t i = 0; i < n / 32; ++i) {
        const uint16_t bits = static_cast<uint16_t>(random_scale_bits(rng, scale_lo, scale_hi) >> 16);
        std::memcpy(w.scales.data() + 2 * i, &bits, 2);
      }
      break;
    }
  }
  return w;
}

// Y = W X in float64 from the exact weight decode (weight_at).
inline std::vector<double> reference_matmul(const WeightView& w, const std::vector<float>& x, size_t T) {
  std::vector<double> y(T * w.rows);
  for (size_t r = 0; r < w.rows; ++r) {
    for (size_t t = 0; t < T; ++t) {
      double acc = 0;
      for (size_t c = 0; c < w.cols; ++c) acc += static_cast<double>(weight_at(w, r, c)) * x[t * w.cols + c];
      y[t * w.rows + r] = acc;
    }
  }
  return y;
}

inline const char* type_name(WeightType t) { return weight_type_name(t); }

constexpr WeightType kAllTypes[] = {WeightType::F32,   WeightType::BF16,     WeightType::Int8Row,
                                    WeightType::MXFP4, WeightType::FP8Block, WeightType::Int4Group32};

// The types whose products take whole 32-column groups only.
inline bool whole_groups_only(WeightType type) { return type == WeightType::MXFP4 || type == WeightType::Int4Group32; }

// A column count with a partial last group for the types that allow one.
inline size_t cols_for(WeightType type, size_t cols) { return whole_groups_only(type) ? (cols + 31) / 32 * 32 : cols; }

}  // namespace deltafin::test
