// A Hugging Face checkpoint directory's tensors: one `model.safetensors`, or
// shards `model-NNNNN-of-MMMMMM.safetensors` with or without
// `model.safetensors.index.json`. Shard headers are authoritative; an index,
// when present, must agree with them exactly.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/safetensors.h"

namespace deltafin {

struct TensorRef {
  const SafetensorsFile* shard = nullptr;
  const TensorInfo* info = nullptr;
  explicit operator bool() const { return info != nullptr; }
};

class Checkpoint {
public:
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  TensorRef find(const std::string& name) const;
  size_t tensor_count() const { return by_name_.size(); }
  std::vector<std::string> names() const;  // sorted
  uint64_t total_bytes() const;

private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::unordered_map<std::string, TensorRef> by_name_;
};

// "model-00001-of-000096.safetensors": 5-digit index, 6-digit total.
std::string shard_file_name(int index_1based, int total);

}  // namespace deltafin
