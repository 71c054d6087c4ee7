// The SHA-256 and CRC-32C of every expert a streamed store has fetched:
// store/remote/hashes.bin, one fixed 48-byte slot per MoE (layer, expert),
// the MoE layers in ascending order, experts in order within each (for K3,
// whose MoE layers are 1..L-1, the layout stores before model families had).
//
// Integrity story (docs/mirror.md): a mirror publishes at
// most per-file hashes of whole shards, which cannot check a 17.5 MB piece
// fetched by a range request. So an expert's hash is recorded at its first
// fetch (after the bytes passed the length and MXFP4 checks), before its file
// is installed, and every later fetch of it (after an eviction, or into a
// second store drive) must match it or is refused. Local reads check the
// recorded CRC-32C like any store read.
//
// Slot: u32 magic "DFH1", u32 crc32c of the record, 32-byte sha256, u32 zero,
// u32 CRC-32C of the first 44 bytes. All zero = not fetched yet. A slot is
// written with one pwrite and fdatasync; a slot torn by a crash fails its own
// CRC, is reported and treated as not fetched.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "util/sha256.h"

namespace deltafin {

struct ExpertHash {
  Sha256Digest sha256{};
  uint32_t crc32c = 0;
};

class HashJournal {
public:
  enum class Mode { ReadWrite, ReadOnly };
  // Opens the journal for `moe_layers` (ascending) x experts. ReadWrite
  // creates it (all slots empty) when absent; ReadOnly (doctor) never
  // writes: a missing file means nothing is recorded, and record() is refused.
  HashJournal(const std::string& store_dir, std::vector<int64_t> moe_layers, int64_t experts,
              Mode mode = Mode::ReadWrite);
  // The same for MoE layers 1..layers-1 (K3's).
  HashJournal(const std::string& store_dir, int64_t layers, int64_t experts, Mode mode = Mode::ReadWrite);
  ~HashJournal();
  HashJournal(const HashJournal&) = delete;
  HashJournal& operator=(const HashJournal&) = delete;

  static std::string path(const std::string& store_dir);  // store/remote/hashes.bin

  std::optional<ExpertHash> get(int64_t layer, int64_t expert) const;
  // Writes the slot durably. Recording a different hash over a known one is
  // refused (a hash, once recorded, never changes).
  void record(int64_t layer, int64_t expert, const ExpertHash& h);
  // Slots found torn when opened ("layer L expert E"), for the caller to report.
  const std::vector<std::string>& damaged() const { return damaged_; }
  size_t known() const;

private:
  size_t slot(int64_t layer, int64_t expert) const;
  std::string path_;
  int fd_ = -1;  // -1 in ReadOnly mode
  std::vector<int64_t> moe_layers_;
  std::vector<int64_t> slot_of_layer_;  // [layer] -> position in moe_layers_, -1 for dense layers
  int64_t experts_;
  mutable std::mutex mutex_;
  std::vector<std::optional<ExpertHash>> slots_;
  std::vector<std::string> damaged_;
};

}  // namespace deltafin
