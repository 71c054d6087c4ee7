// The safetensors element types this runtime understands.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace deltafin {

enum class DType { BF16, F16, F32, U8, I8, I32, I64, F8_E4M3 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);                 // safetensors spelling, e.g. "BF16"
std::optional<DType> parse_dtype(std::string_view s);  // nullopt for anything unknown

}  // namespace deltafin
