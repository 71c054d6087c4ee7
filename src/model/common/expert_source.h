// Where the model gets routed-expert weights: only through this interface, so
// the engine can serve them from RAM (resident), from a cache fed by direct
// reads of the store, or from a remote mirror, without the model knowing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace deltafin {

// The bytes of one expert record, kept alive while the handle lives. What a
// record holds is the family's (K3: k3-model.md §5.1, six MXFP4 tensors;
// Qwen3-MoE: gate, up and down projections in BF16); the source only moves
// bytes.
struct ExpertHandle {
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> keep_alive;
};

class ExpertSource {
public:
  virtual ~ExpertSource() = default;
  // Blocks until the record of (layer, expert) is available.
  virtual ExpertHandle get(int64_t layer, int64_t expert) = 0;
  // Calls use(i, record) once for each experts[i] on the calling thread:
  // experts already in RAM first, then each missing one as its read lands, so
  // compute overlaps the reads. The caller keeps results per expert and
  // combines them in its own fixed order, so the order of calls never changes
  // a bit of the output. The record is valid only during the call.
  virtual void for_each_ready(int64_t layer, std::span<const int64_t> experts,
                              const std::function<void(size_t index, const uint8_t* record)>& use);
  // A hint that these experts of `layer` are needed soon; may start reads.
  // Experts of `layer` hinted but not then requested are dropped when the
  // layer's real request comes.
  virtual void prefetch(int64_t /*layer*/, std::span<const int64_t> /*experts*/) {}
  // A layer-major pass computes a layer's experts in `requests` slices of
  // rows, one for_each_ready call each, one after another; before the first
  // it names the union of all of them. The source keeps that union for the
  // later slices (it must not cancel or evict first what a later slice
  // needs). Not called when a layer is asked for in one request.
  virtual void begin_layer(int64_t /*layer*/, std::span<const int64_t> /*union_experts*/, size_t /*requests*/) {}
  // A forward pass over `positions` new positions starts / ended (accounting).
  virtual void begin_pass(size_t /*positions*/) {}
  virtual void end_pass() {}
};

// Every expert of every MoE layer read into RAM at construction by
// read(layer, expert) (the family's checkpoint reader): the resident reference.
class ResidentExpertSource : public ExpertSource {
public:
  // Writes the record_bytes of (layer, expert) to out.
  using ReadRecord = std::function<void(int64_t layer, int64_t expert, uint8_t* out)>;
  ResidentExpertSource(int64_t layers, int64_t experts, std::span<const int64_t> moe_layers, uint64_t record_bytes,
                       const ReadRecord& read);
  ExpertHandle get(int64_t layer, int64_t expert) override;

private:
  int64_t layers_ = 0, experts_ = 0;
  std::vector<std::shared_ptr<const uint8_t>> records_;  // [layer * experts + expert]; null off MoE layers
};

}  // namespace deltafin
