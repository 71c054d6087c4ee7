// A routed expert's record in a DeepSeek-V3-family store: its three
// projections exactly as released, gate_proj ‖ up_proj ‖ down_proj values,
// then their scales in the same order (FP8: float32 weight_scale_inv per
// 128 x 128 block; INT4: BF16 weight_scale per 32 columns; BF16: none),
// the tensors' bytes back to back (weights.h: deepseek_v3_expert_specs). The
// values of all three come first so the scales sit aligned after them.
#pragma once

#include <cstdint>

#include "kernels/weights.h"

namespace deltafin {

struct DeepseekV3Config;

struct DsExpertLayout {
  WeightType type = WeightType::BF16;
  uint64_t gate = 0, up = 0, down = 0;                     // value offsets
  uint64_t gate_scales = 0, up_scales = 0, down_scales = 0;  // scale offsets (unused for BF16)
  uint64_t value_bytes[3] = {0, 0, 0}, scale_bytes[3] = {0, 0, 0};
  uint64_t bytes = 0;
};

// The layout of the config's routed experts (its quantization_config).
DsExpertLayout ds_expert_layout(const DeepseekV3Config& config);

// Bytes of the values / scales of one [rows, cols] projection of `type`.
uint64_t ds_value_bytes(WeightType type, uint64_t rows, uint64_t cols);
uint64_t ds_scale_bytes(WeightType type, uint64_t rows, uint64_t cols);

}  // namespace deltafin
