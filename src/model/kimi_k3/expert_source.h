// Where the model gets routed-expert weights: only through this interface, so
// the engine can serve them from RAM (resident), from a cache fed by direct
// reads of the store, or from a remote mirror, without the model knowing.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace deltafin {

class K3Checkpoint;

// The bytes of one expert record (k3-model.md §5.1: w1 packed, w1 scale, w2
// packed, w2 scale, w3 packed, w3 scale), kept alive while the handle lives.
struct ExpertHandle {
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> keep_alive;
};

class ExpertSource {
public:
  virtual ~ExpertSource() = default;
  // Blocks until the record of (layer, expert) is available.
  virtual ExpertHandle get(int64_t layer, int64_t expert) = 0;
  // A hint that these experts of `layer` are needed next; may start reads.
  virtual void prefetch(int64_t /*layer*/, std::span<const int64_t> /*experts*/) {}
};

// All experts read from the checkpoint into RAM at construction.
class ResidentExpertSource : public ExpertSource {
public:
  explicit ResidentExpertSource(const K3Checkpoint& checkpoint);
  ExpertHandle get(int64_t layer, int64_t expert) override;

private:
  int64_t layers_ = 0, experts_ = 0;
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> records_;  // [layer * experts + expert]
};

}  // namespace deltafin
