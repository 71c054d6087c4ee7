#include "backend/backend.h"

#include "util/error.h"

namespace deltafin {

Act& Act::operator=(Act&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = other.owner_, slot_ = other.slot_, storage_ = other.storage_, rows_ = other.rows_, width_ = other.width_;
    other.owner_ = nullptr, other.storage_ = nullptr, other.rows_ = other.width_ = 0;
  }
  return *this;
}

void Act::reset() {
  if (owner_) owner_->release(slot_);
  owner_ = nullptr;
  storage_ = nullptr;
  rows_ = width_ = 0;
}

Act Backend::act(size_t rows, size_t width) {
  Act a;
  const Slot s = acquire(rows * width);
  a.slot_ = s.index;
  a.storage_ = s.storage;
  a.owner_ = this;
  a.rows_ = rows, a.width_ = width;
  return a;
}

}  // namespace deltafin
