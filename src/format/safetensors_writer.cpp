#include "format/safetensors_writer.h"

#include <nlohmann/json.hpp>
#include <set>

#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

uint64_t TensorSpec::bytes() const {
  uint64_t n = dtype_size(dtype);
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string safetensors_header_json(const std::vector<TensorSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the payload order in the header, as the reference
  // Python writer does; readers must not depend on it.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const TensorSpec& t : tensors) {
    // A repeated name would overwrite the first entry in the JSON object and
    // leave its payload unreferenced: refuse it.
    if (!names.insert(t.name).second) fail("tensor '", t.name, "' appears twice in the tensor list");
    uint64_t n = t.bytes();
    h[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string s = h.dump();
  // Pad with spaces so the payload starts 8-byte aligned (safetensors convention).
  while ((8 + s.size()) % 8 != 0) s.push_back(' ');
  return s;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : out_(path), tensors_(std::move(tensors)) {
  for (const TensorSpec& t : tensors_) payload_total_ += t.bytes();
  std::string header = with_context(path, [&] { return safetensors_header_json(tensors_, metadata); });
  uint8_t len[8];
  store_u64le(len, header.size());
  out_.write(len, 8);
  out_.write(header.data(), header.size());
}

void SafetensorsWriter::append(const void* data, size_t n) {
  if (payload_written_ + n > payload_total_)
    fail(out_.path(), ": writer got more payload bytes than its ", tensors_.size(), " tensors hold (", payload_total_, ")");
  out_.write(data, n);
  payload_written_ += n;
}

void SafetensorsWriter::commit() {
  if (payload_written_ != payload_total_)
    fail(out_.path(), ": writer got ", payload_written_, " payload bytes, tensors need ", payload_total_);
  out_.commit();
}

}  // namespace deltafin
