// Where each routed expert's six tensors lie in the mirror's shards, taken
// from the safetensors headers at setup --stream and kept in the store as
// remote/experts.bin (binary: at K3 scale 82,432 experts x 6 ranges, ~10 MB
// as binary against ~60 MB of shard-header JSON to parse at every start).
//
// experts.bin: "DFXR0001", u64 layers, u64 experts, u64 shards, then for each
// MoE layer 1..layers-1 and expert 0..experts-1 six records
// {u32 shard, u64 offset, u64 bytes} (little-endian, in record order: w1
// packed, w1 scale, w2 packed, w2 scale, w3 packed, w3 scale), then the
// CRC-32C of all bytes before it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/k3_checkpoint.h"
#include "store/store_manifest.h"

namespace deltafin {

struct TensorRange {
  uint32_t shard = 0;   // index into StoreManifest::remote->shards
  uint64_t offset = 0;  // absolute byte offset in the shard file
  uint64_t bytes = 0;
};

class ExpertRanges {
public:
  static constexpr size_t kTensorsPerExpert = 6;

  // From a checkpoint opened from the mirror; `shards` names the shard files
  // in the order ranges refer to them.
  static ExpertRanges from_checkpoint(const K3Checkpoint& k, const std::vector<RemoteFile>& shards);
  // Reads and checks remote/experts.bin against the manifest (sizes, shard
  // count, every range inside its shard, ranges summing to expert_bytes).
  static ExpertRanges load(const std::string& store_dir, const StoreManifest& m);
  void save(const std::string& store_dir) const;  // atomic

  static std::string path(const std::string& store_dir);  // store/remote/experts.bin

  std::span<const TensorRange> tensors(int64_t layer, int64_t expert) const;
  // The expert's bytes as few HTTP requests: adjacent ranges of one shard
  // merged, in record order (concatenating them gives the record).
  std::vector<TensorRange> requests(int64_t layer, int64_t expert) const;

private:
  size_t index(int64_t layer, int64_t expert) const;
  int64_t layers_ = 0, experts_ = 0;
  uint64_t shards_ = 0;
  std::vector<TensorRange> ranges_;  // [((layer - 1) * experts + expert) * 6 + t]
};

}  // namespace deltafin
