// Where the model gets routed-expert weights: only through this interface, so
// the engine can serve them from RAM (resident), from a cache fed by direct
// reads of the store, or from a remote mirror, without the model knowing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/common/route.h"

namespace deltafin {

// The bytes of one expert record, kept alive while the handle lives. What a
// record holds is the family's (K3: k3-model.md §5.1, six MXFP4 tensors;
// Qwen3-MoE: gate, up and down projections in BF16); the source only moves
// bytes.
struct ExpertHandle {
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> keep_alive;
};

// experts[index] of a for_each_ready_group request, and its record.
struct ReadyExpert {
  size_t index;
  const uint8_t* record;
};

class ExpertSource {
public:
  virtual ~ExpertSource() = default;
  // Blocks until the record of (layer, expert) is available.
  virtual ExpertHandle get(int64_t layer, int64_t expert) = 0;
  // Calls use(group) on the calling thread with every expert of `experts`
  // that is ready at that moment, until each experts[i] has been handed over
  // exactly once: experts already in RAM first (one group), then missing ones
  // as their reads land, so compute overlaps the reads; a group lets the
  // caller compute several experts at once, one per thread. The caller keeps
  // results per expert and combines them in its own fixed order, so neither
  // the grouping nor the order changes a bit of the output. The records are
  // valid only during the call.
  virtual void for_each_ready_group(int64_t layer, std::span<const int64_t> experts,
                                    const std::function<void(std::span<const ReadyExpert> group)>& use);
  // The same, one expert per call: use(i, record) for each experts[i].
  void for_each_ready(int64_t layer, std::span<const int64_t> experts,
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

  // Whoever wants every route (a route trace); null = nobody. The routed
  // experts block and ExpertPass tell it, whatever the source is.
  void set_route_observer(RouteObserver* observer) { route_observer_ = observer; }
  RouteObserver* route_observer() const { return route_observer_; }

private:
  RouteObserver* route_observer_ = nullptr;
};

// One forward pass of a source: begin_pass at construction, end_pass at end()
// or when it goes out of scope, whichever comes first. A family holds one for
// its pass, so no way out of the pass (a cancellation, an expert read error)
// skips end_pass, which drops the pass's unused prefetches and decays heat.
class ExpertPass {
public:
  ExpertPass(ExpertSource& source, size_t positions) : source_(&source) {
    if (RouteObserver* o = source.route_observer()) o->begin_pass(positions);
    source.begin_pass(positions);
  }
  ~ExpertPass() { end(); }
  ExpertPass(const ExpertPass&) = delete;
  ExpertPass& operator=(const ExpertPass&) = delete;
  void end() {
    ExpertSource* s = source_;
    source_ = nullptr;
    if (s) s->end_pass();
  }

private:
  ExpertSource* source_;
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
