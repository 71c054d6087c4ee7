// The byte layout of one spine file (design.md §3):
//
//   "DFSPINE1"            8-byte magic
//   u64 little-endian     header length n
//   n bytes               JSON {"format":"deltafin-spine","version":1,"spine":"bf16"|"int8-row",
//                               "tensors":[{"name","dtype","shape","offset","bytes"}, ...]}
//   zero padding, then each payload at its absolute, 4096-aligned "offset",
//   zero padding after each payload to the next 4096 boundary (the file size
//   is a multiple of 4096, so every payload can be read with direct I/O).
//
// Tensor names are the checkpoint's. An int8-row matrix X is two entries: X
// (I8 [rows, cols]) and spine_scale_name(X) (F16 [rows]) right after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/dtype.h"
#include "store/store_manifest.h"
#include "util/file.h"

namespace deltafin {

inline constexpr char kSpineMagic[9] = "DFSPINE1";
inline constexpr uint64_t kSpineAlign = 4096;

struct SpineTensor {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<uint64_t> shape;
  uint64_t offset = 0, bytes = 0;  // absolute offset in the file
};

struct SpineHeader {
  SpineFormat format = SpineFormat::BF16;
  std::vector<SpineTensor> tensors;  // in file order
};

inline uint64_t round_up_spine(uint64_t n) { return (n + kSpineAlign - 1) / kSpineAlign * kSpineAlign; }
inline std::string spine_scale_name(const std::string& matrix) { return matrix + "#row_scale"; }

// Sets every tensor's offset and returns the file's bytes up to the first
// payload (magic, length, JSON, zero padding). *file_bytes gets the total size.
std::string layout_spine_file(SpineFormat format, std::vector<SpineTensor>& tensors, uint64_t* file_bytes);

// Reads and validates the header of an open spine file: magic, JSON, dtypes,
// shapes matching byte counts, offsets aligned, in order, inside the file.
// Errors name the file and the tensor.
SpineHeader read_spine_header(const File& file);

}  // namespace deltafin
