#include "server/admission.h"

#include <algorithm>
#include <chrono>

namespace deltafin {

std::unique_ptr<Admission::Ticket> Admission::try_enter(uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (waiting_.size() + running_.size() >= queue_ + parallel_) {
    ++refused_;
    return nullptr;
  }
  waiting_.push_back({next_number_, bytes});
  return std::unique_ptr<Ticket>(new Ticket(this, next_number_++, bytes));
}

// The oldest waiting ticket starts when a slot is free and its memory fits
// beside the running ones (or nothing runs: a request alone always fits, the
// context limit being what the budget holds).
bool Admission::may_start(uint64_t number) const {
  if (waiting_.empty() || waiting_.front().number != number || running_.size() >= parallel_) return false;
  return budget_ == 0 || running_.empty() || running_bytes_ + waiting_.front().bytes <= budget_;
}

void Admission::leave(uint64_t number) {
  {
    std::lock_guard lock(mu_);
    auto is = [&](const Place& p) { return p.number == number; };
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), is), waiting_.end());
    for (const Place& p : running_)
      if (p.number == number) running_bytes_ -= p.bytes;
    running_.erase(std::remove_if(running_.begin(), running_.end(), is), running_.end());
  }
  cv_.notify_all();
}

Admission::Counts Admission::counts() const {
  std::lock_guard lock(mu_);
  Counts c;
  c.active = running_.size();
  c.waiting = waiting_.size();
  c.refused = refused_;
  c.active_bytes = running_bytes_;
  return c;
}

bool Admission::Ticket::wait_turn(const std::function<bool()>& cancelled) {
  std::unique_lock lock(owner_->mu_);
  for (;;) {
    if (owner_->may_start(number_)) {
      owner_->waiting_.erase(owner_->waiting_.begin());
      owner_->running_.push_back({number_, bytes_});
      owner_->running_bytes_ += bytes_;
      lock.unlock();
      owner_->cv_.notify_all();  // the next in line may start too
      return true;
    }
    owner_->cv_.wait_for(lock, std::chrono::milliseconds(20));
    if (owner_->may_start(number_)) continue;
    lock.unlock();
    const bool gone = cancelled && cancelled();
    if (gone) {
      release();
      return false;
    }
    lock.lock();
  }
}

void Admission::Ticket::release() {
  if (released_) return;
  released_ = true;
  owner_->leave(number_);
}

Admission::Ticket::~Ticket() { release(); }

}  // namespace deltafin
