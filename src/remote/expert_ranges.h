// Where each routed expert's tensors lie in the mirror's shards, taken from
// the safetensors headers at setup --stream and kept in the store as
// remote/experts.bin (binary: at K3 scale 82,432 experts x 6 ranges, ~10 MB
// as binary against ~60 MB of shard-header JSON to parse at every start).
// The tensors of a record and their order are the family's
// (FamilyCheckpoint::expert_tensor_names: K3's six MXFP4 tensors, Qwen3-MoE's
// gate, up and down projections).
//
// experts.bin, version 2: "DFXR0002", u64 layers, u64 experts, u64 shards,
// u64 parts (tensors per record), u64 n, then the n MoE layers (u64 each,
// ascending), then for each of those layers and expert 0..experts-1 `parts`
// records {u32 shard, u64 offset, u64 bytes} in record order, then the
// CRC-32C of all bytes before it (all little-endian). Version 1
// ("DFXR0001", K3 stores from before model families) has no parts or layer
// fields: six parts, MoE layers 1 .. layers-1; it is still read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/common/family_checkpoint.h"
#include "store/store_manifest.h"

namespace deltafin {

struct TensorRange {
  uint32_t shard = 0;   // index into StoreManifest::remote->shards
  uint64_t offset = 0;  // absolute byte offset in the shard file
  uint64_t bytes = 0;
};

class ExpertRanges {
public:
  // From a checkpoint opened from the mirror; `shards` names the shard files
  // in the order ranges refer to them.
  static ExpertRanges from_checkpoint(const FamilyCheckpoint& k, const std::vector<RemoteFile>& shards);
  // Reads and checks remote/experts.bin against the manifest (sizes, MoE
  // layers, parts per record, shard count, every range inside its shard,
  // ranges summing to expert_bytes).
  static ExpertRanges load(const std::string& store_dir, const StoreManifest& m);
  void save(const std::string& store_dir) const;  // atomic, version 2

  static std::string path(const std::string& store_dir);  // store/remote/experts.bin

  size_t parts() const { return parts_; }
  std::span<const TensorRange> tensors(int64_t layer, int64_t expert) const;
  // The expert's bytes as few HTTP requests: adjacent ranges of one shard
  // merged, in record order (concatenating them gives the record).
  std::vector<TensorRange> requests(int64_t layer, int64_t expert) const;

private:
  size_t index(int64_t layer, int64_t expert) const;
  void set_layers(int64_t layers, std::vector<int64_t> moe_layers);
  int64_t layers_ = 0, experts_ = 0;
  uint64_t shards_ = 0;
  size_t parts_ = 0;
  std::vector<int64_t> moe_layers_;
  std::vector<int64_t> slot_;        // [layer] -> position in moe_layers_, -1 for dense layers
  std::vector<TensorRange> ranges_;  // [(slot * experts + expert) * parts + t]
};

}  // namespace deltafin
