// A Hugging Face checkpoint as the store sees it, whatever the family:
// which tensors are the resident spine (and which layer each belongs to),
// which layers hold routed experts, and what one expert record is (its
// tensors' bytes as released, back to back). `deltafin setup` writes a store
// from this alone, and the manifest records the layout, so the store,
// striping, replication and the reader never learn a family's tensor names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "format/safetensors_writer.h"

namespace deltafin {

// One tensor of an expert record: the record is these tensors' bytes as
// released, back to back at the given offsets.
struct RecordPart {
  std::string tensor;  // the tensor's name inside one expert, e.g. "gate_proj.weight"
  std::string dtype;   // as safetensors names it: "BF16", "U8"
  std::vector<uint64_t> shape;
  uint64_t offset = 0, bytes = 0;
};

struct SpineTensorSpec {
  TensorSpec tensor;      // name, dtype and shape as in the checkpoint
  int64_t layer = -1;     // the layer it belongs to; -1: the globals (embeddings, final norm, head)
  bool matrix = false;    // loaded as a matrix in its stored type (else widened to fp32)
  bool int8_row = false;  // quantised in an int8-row spine (design.md §3; k3-model.md §5.2)
};

class FamilyCheckpoint {
public:
  virtual ~FamilyCheckpoint() = default;
  virtual std::string family() const = 0;  // model/registry.h's name
  virtual const Checkpoint& tensors() const = 0;
  virtual int64_t layers() const = 0;
  virtual int64_t experts() const = 0;  // per MoE layer
  virtual std::vector<int64_t> moe_layers() const = 0;
  virtual std::vector<RecordPart> record_layout() const = 0;
  // The full names of the tensors of one expert's record, in record order
  // (where setup --stream finds each record's bytes in the mirror's shards).
  virtual std::vector<std::string> expert_tensor_names(int64_t layer, int64_t expert) const = 0;
  uint64_t record_bytes() const;
  virtual std::vector<uint8_t> read_expert_record(int64_t layer, int64_t expert) const = 0;
  virtual std::vector<SpineTensorSpec> spine_tensors() const = 0;
  // The tokenizer files the store copies beside config.json (those present are copied).
  virtual std::vector<std::string> tokenizer_files() const = 0;
  // Whether the family's loader reads an int8-row spine (K3 does; others keep BF16).
  virtual bool int8_row_spine() const { return false; }
};

// The record parts of `tensors` (one expert's, in record order), named
// without `prefix` (the expert's common name prefix).
std::vector<RecordPart> record_parts(const std::vector<TensorSpec>& tensors, const std::string& prefix);

}  // namespace deltafin
