#include "server/admission.h"

#include <algorithm>
#include <chrono>

namespace deltafin {

std::unique_ptr<Admission::Ticket> Admission::try_enter() {
  std::lock_guard lock(mu_);
  if (line_.size() >= queue_ + 1) {
    ++refused_;
    return nullptr;
  }
  line_.push_back(next_number_);
  return std::unique_ptr<Ticket>(new Ticket(this, next_number_++));
}

void Admission::leave(uint64_t number) {
  {
    std::lock_guard lock(mu_);
    line_.erase(std::remove(line_.begin(), line_.end(), number), line_.end());
  }
  cv_.notify_all();
}

Admission::Counts Admission::counts() const {
  std::lock_guard lock(mu_);
  Counts c;
  c.active = line_.empty() ? 0 : 1;
  c.waiting = line_.empty() ? 0 : line_.size() - 1;
  c.refused = refused_;
  return c;
}

bool Admission::Ticket::wait_turn(const std::function<bool()>& cancelled) {
  std::unique_lock lock(owner_->mu_);
  for (;;) {
    // Numbers only grow and the line keeps arrival order, so the front is
    // the oldest ticket still in line.
    if (!owner_->line_.empty() && owner_->line_.front() == number_) return true;
    owner_->cv_.wait_for(lock, std::chrono::milliseconds(20));
    if (owner_->line_.empty() || owner_->line_.front() != number_) {
      lock.unlock();
      bool gone = cancelled && cancelled();
      lock.lock();
      if (gone) {
        lock.unlock();
        release();
        return false;
      }
    }
  }
}

void Admission::Ticket::release() {
  if (released_) return;
  released_ = true;
  owner_->leave(number_);
}

Admission::Ticket::~Ticket() { release(); }

}  // namespace deltafin
