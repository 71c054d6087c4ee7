#include "model/common/pass_driver.h"

namespace deltafin {

PassDriver::PassDriver(ExpertSource& experts, size_t positions, const PassShape& shape)
    : experts_pass_(experts, positions), shape_(shape), polled_(std::chrono::steady_clock::now()) {
  if (shape_.cancelled) poll_ = [this] { return cancel_requested(); };
}

bool PassDriver::begin_layer(int64_t layer) {
  if (shape_.cancelled) {
    seen_ = seen_ || shape_.cancelled();
    polled_ = std::chrono::steady_clock::now();
    if (seen_) return false;
  }
  if (shape_.on_layer) shape_.on_layer(layer);
  return true;
}

bool PassDriver::cancel_requested() {
  if (!shape_.cancelled) return false;
  if (seen_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now - polled_ < shape_.poll_interval) return false;
  polled_ = now;
  seen_ = shape_.cancelled();
  return seen_;
}

}  // namespace deltafin
