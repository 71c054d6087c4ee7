// Writes one safetensors file in bounded memory: the header is computed up
// front from the tensor list, then payloads are appended in that order, in as
// many pieces as the caller likes. The file appears under its final name only
// after commit() (AtomicFile), so an interrupted write leaves nothing behind.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "format/dtype.h"
#include "util/file.h"

namespace deltafin {

struct TensorSpec {
  std::string name;
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
  uint64_t bytes() const;
};

class SafetensorsWriter {
public:
  SafetensorsWriter(const std::string& path, std::vector<TensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata = {});

  // Appends payload bytes; tensors are filled in the order given.
  void append(const void* data, size_t n);
  // Checks every tensor was filled exactly, then fsyncs and renames.
  void commit();
  uint64_t payload_bytes() const { return payload_total_; }

private:
  AtomicFile out_;
  std::vector<TensorSpec> tensors_;
  uint64_t payload_total_ = 0, payload_written_ = 0;
};

// The header JSON exactly as the writer lays it out (tests build malformed
// variants from it).
std::string safetensors_header_json(const std::vector<TensorSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata);

}  // namespace deltafin
