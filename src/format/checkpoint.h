// A Hugging Face checkpoint directory's tensors: one `model.safetensors`, or
// shards `model-NNNNN-of-MMMMMM.safetensors` with or without
// `model.safetensors.index.json`. Shard headers are authoritative; an index,
// when present, must agree with them exactly.
#pragma once

#include <map>
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
  // A checkpoint whose shards are not in `dir` (setup --stream: they are on a
  // mirror): the shard list comes from dir's model.safetensors.index.json
  // (or is model.safetensors when there is no index) and each shard is opened
  // through `opener`.
  static Checkpoint open_remote(const std::string& dir, const ShardOpener& opener);

  const std::string& dir() const { return dir_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  TensorRef find(const std::string& name) const;
  size_t tensor_count() const { return by_name_.size(); }
  std::vector<std::string> names() const;  // sorted
  uint64_t total_bytes() const;

private:
  static Checkpoint assemble(const std::string& dir, const std::vector<std::string>& files, const ShardOpener& opener,
                             const std::string& index_path, const std::map<std::string, std::string>* index);
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::unordered_map<std::string, TensorRef> by_name_;
};

// "model-00001-of-000096.safetensors": 5-digit index, 6-digit total (K3's
// release); total_digits 5 gives Hugging Face's usual model-00001-of-00002.
std::string shard_file_name(int index_1based, int total, int total_digits = 6);

}  // namespace deltafin
