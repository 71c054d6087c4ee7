// What every family's forward pass does around its layers, written once:
// the expert source's pass (begin_pass now, end_pass however the pass ends:
// model/common/expert_source.h's ExpertPass), the progress callback, and
// cancellation: asked before every layer, and inside a layer at most once
// per PassShape::poll_interval (a long prompt's layer is minutes of work);
// once it has said yes it stays yes, so every check after unwinds too.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "model/common/causal_model.h"
#include "model/common/expert_source.h"

namespace deltafin {

class PassDriver {
public:
  PassDriver(ExpertSource& experts, size_t positions, const PassShape& shape);

  // Before layer `layer`: asks `cancelled` (unthrottled; false: abandon the
  // pass), then tells on_layer.
  bool begin_layer(int64_t layer);
  // Inside a layer, throttled; true once cancelled.
  bool cancel_requested();
  // A callback for blocks that poll (attention, the routed experts); empty
  // when the pass cannot be cancelled. Valid while the driver lives.
  const std::function<bool()>& poll() const { return poll_; }
  // The experts are done (the pass's tail reads none): end_pass now.
  void end_experts() { experts_pass_.end(); }

private:
  ExpertPass experts_pass_;
  const PassShape& shape_;
  std::function<bool()> poll_;
  bool seen_ = false;
  std::chrono::steady_clock::time_point polled_;
};

}  // namespace deltafin
