// Builds the spine files of a store from a checkpoint (design.md §3): which
// tensors go in which file, in which stored type, and the bytes of each file,
// produced in bounded memory (the K3 embedding alone is 2.3 GB).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/common/family_checkpoint.h"
#include "store/spine_layout.h"
#include "store/store_manifest.h"

namespace deltafin {

struct SpineSourceTensor {
  std::string name;
  bool quantize = false;  // int8-row target in an int8-row spine
};

struct SpineFilePlan {
  std::string path;                        // relative to the store: spine/globals.bin, spine/L003.bin
  std::vector<SpineSourceTensor> sources;  // checkpoint tensors, in file order
  std::vector<SpineTensor> tensors;        // stored tensors (a quantised matrix has two), with offsets
  std::string head;                        // magic + header + padding up to the first payload
  uint64_t bytes = 0;                      // file size
};

struct SpinePlan {
  SpineFormat format = SpineFormat::BF16;
  std::vector<SpineFilePlan> files;
  uint64_t file_bytes = 0;      // sum of the files' sizes
  uint64_t resident_bytes = 0;  // RAM once loaded (matrices as stored, vectors as fp32)
};

// One file of the globals (spine/globals.bin) and one per layer
// (spine/L003.bin); an int8-row plan quantises the tensors the family marks.
SpinePlan plan_spine(const FamilyCheckpoint& checkpoint, SpineFormat format);

// Produces one file's bytes in order into `out`, which may write them to a
// file, hash them, or both; `out` may throw to stop (Ctrl-C). The source is
// read about `chunk_bytes` at a time (whole rows for a quantised matrix); the
// output does not depend on it.
void generate_spine_file(const FamilyCheckpoint& checkpoint, const SpineFilePlan& plan,
                         const std::function<void(const uint8_t*, size_t)>& out, uint64_t chunk_bytes = 8u << 20);

}  // namespace deltafin
