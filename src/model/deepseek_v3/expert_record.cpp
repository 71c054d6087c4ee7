#include "model/deepseek_v3/expert_record.h"

#include "model/deepseek_v3/config.h"
#include "util/error.h"

namespace deltafin {

namespace {

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

uint64_t ds_value_bytes(WeightType type, uint64_t rows, uint64_t cols) {
  switch (type) {
    case WeightType::BF16: return rows * cols * 2;
    case WeightType::FP8Block: return rows * cols;
    case WeightType::Int4Group32: return rows * cols / 2;
    default: return rows * cols * 4;
  }
}

uint64_t ds_scale_bytes(WeightType type, uint64_t rows, uint64_t cols) {
  switch (type) {
    case WeightType::FP8Block: return round_up(rows, 128) / 128 * (round_up(cols, 128) / 128) * 4;
    case WeightType::Int4Group32: return rows * (cols / 32) * 2;
    default: return 0;
  }
}

DsExpertLayout ds_expert_layout(const DeepseekV3Config& c) {
  DsExpertLayout L;
  L.type = c.quant == DsQuant::Fp8Block ? WeightType::FP8Block
           : c.quant == DsQuant::Int4Experts ? WeightType::Int4Group32
                                              : WeightType::BF16;
  const uint64_t d = static_cast<uint64_t>(c.hidden_size), I = static_cast<uint64_t>(c.moe_intermediate_size);
  const uint64_t shapes[3][2] = {{I, d}, {I, d}, {d, I}};
  uint64_t at = 0, value_at[3], scale_at[3];
  for (int i = 0; i < 3; ++i) {
    L.value_bytes[i] = ds_value_bytes(L.type, shapes[i][0], shapes[i][1]);
    L.scale_bytes[i] = ds_scale_bytes(L.type, shapes[i][0], shapes[i][1]);
    value_at[i] = at;
    at += L.value_bytes[i];
  }
  // Scales are read as 4-byte floats (FP8) or 2-byte BF16 (INT4) in place.
  if (L.type == WeightType::FP8Block && at % 4 != 0)
    fail("deepseek_v3: an FP8 expert's values take ", at, " bytes, not a multiple of 4; its block scales would be "
         "misaligned (moe_intermediate_size x hidden_size must be even)");
  for (int i = 0; i < 3; ++i) {
    scale_at[i] = at;
    at += L.scale_bytes[i];
  }
  L.gate = value_at[0], L.up = value_at[1], L.down = value_at[2];
  L.gate_scales = scale_at[0], L.up_scales = scale_at[1], L.down_scales = scale_at[2];
  L.bytes = at;
  return L;
}

}  // namespace deltafin
