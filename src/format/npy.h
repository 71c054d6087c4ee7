// NumPy .npy (format version 1.0) writer for float32 arrays, so logits can be
// compared with other implementations (np.load reads it directly).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deltafin {

// Writes a C-order float32 array of the given shape, atomically.
void write_npy_f32(const std::string& path, const std::vector<uint64_t>& shape, const float* data);

// The header bytes (magic, version, length, dict, padding) for such an array.
std::string npy_header_f32(const std::vector<uint64_t>& shape);

}  // namespace deltafin
