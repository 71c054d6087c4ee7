// The long-input guards applied before the pre-tokenizer regex
// (k3-model.md §8.2), exactly as Kimi's tokenization_kimi.py (inherited from
// Llama 3's tokenizer) does them: cut the text into slices of 400,000
// scalars, then cut each slice wherever a run of same-class characters
// (class = Python str.isspace) would exceed 25,000, so no slice holds more
// than 25,000 consecutive whitespace or non-whitespace characters. Each
// resulting slice is tokenised on its own, so the cuts change ids; they are
// part of the tokenizer's definition, not only a safety net.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace deltafin {

inline constexpr size_t kMaxEncodeScalars = 400000;
inline constexpr size_t kMaxSameClassRun = 25000;

// The slices of `text` (valid UTF-8), in order, never empty. The limits are
// parameters so tests can use small ones.
std::vector<std::string_view> split_long_input(std::string_view text, size_t max_slice_scalars = kMaxEncodeScalars,
                                               size_t max_run = kMaxSameClassRun);

}  // namespace deltafin
