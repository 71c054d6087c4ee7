// Binds a Hugging Face K3-architecture checkpoint directory: the typed config,
// the tensors, and a check that every tensor the architecture needs exists with
// the right dtype and shape and nothing unexpected is there. All problems are
// collected and reported together, so one run shows everything to fix.
#pragma once

#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "model/kimi_k3/config.h"

namespace deltafin {

struct K3Checkpoint {
  std::string dir;
  K3Config config;
  Checkpoint tensors;
  int64_t kda_gate_rank = 0;        // r_f, read from f_a_proj's shape
  size_t ignored_tensors = 0;       // vision_tower.* and mm_projector.*: present, never loaded
  bool pinned_revision = false;     // metadata files match the pinned K3 release (§2.5)

  // The tensor or a named error.
  TensorRef tensor(const std::string& name) const;
  // Raw bytes of one routed expert's record (§5.1): the six tensors concatenated.
  std::vector<uint8_t> read_expert_record(int64_t layer, int64_t expert) const;
  // The same bytes written to out (k3_expert_record_bytes(config) of them).
  void read_expert_record_into(int64_t layer, int64_t expert, uint8_t* out) const;
};

struct BindReport {
  std::vector<std::string> missing, unexpected, wrong;  // wrong: dtype or shape, with details
  size_t ignored = 0;
  bool ok() const { return missing.empty() && unexpected.empty() && wrong.empty(); }
  std::string describe(size_t max_per_list = 100) const;
};

BindReport bind_k3_tensors(const Checkpoint& ckpt, const K3Config& config, int64_t kda_gate_rank);

// Loads config.json, the shards, binds them, and checks the vocabulary against
// tiktoken.model when present (V = ranks + 256).
K3Checkpoint load_k3_checkpoint(const std::string& dir);
// The same for a checkpoint whose shards are read through `opener` (a mirror);
// dir holds its config, tokenizer and index files.
K3Checkpoint load_k3_checkpoint(const std::string& dir, const ShardOpener& opener);

}  // namespace deltafin
