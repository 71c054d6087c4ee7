// Reading safetensors files: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [start, end)}, "__metadata__"?},
// then the payload. Headers are validated strictly, every error naming the file
// and tensor, because a malformed shard must never turn into wrong weights.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <memory>

#include "format/byte_source.h"
#include "format/dtype.h"

namespace deltafin {

struct TensorInfo {
  std::string name;
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // header data_offsets, relative to the payload
  uint64_t file_offset = 0;     // absolute: 8 + header length + begin
  uint64_t bytes() const { return end - begin; }
  uint64_t elements() const;
};

class SafetensorsFile {
public:
  // Opens and validates the header. Payload bytes are read on demand.
  static SafetensorsFile open(const std::string& path);
  static SafetensorsFile open(std::unique_ptr<ByteSource> source);

  const std::string& path() const { return source_->name(); }
  uint64_t header_length() const { return header_length_; }
  uint64_t file_size() const { return file_size_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in payload order
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Reads a tensor's bytes (or a sub-range of them) from the source.
  void read(const TensorInfo& t, void* dst) const;
  void read_range(const TensorInfo& t, uint64_t offset, uint64_t n, void* dst) const;

private:
  std::unique_ptr<ByteSource> source_;
  uint64_t header_length_ = 0, file_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Parses and validates a header (exposed for tests and for setup --stream,
// which fetches headers over HTTP). `where` names the file in errors.
std::vector<TensorInfo> parse_safetensors_header(const std::string& header_json, uint64_t header_length,
                                                 uint64_t payload_size, const std::string& where,
                                                 std::map<std::string, std::string>* metadata);

}  // namespace deltafin
