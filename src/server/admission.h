// One generation at a time, up to `queue` more waiting in arrival order, and
// a refusal (HTTP 429) beyond that. A ticket is a place in that line: it is
// taken before any work starts, and given back when its request ends for any
// reason (served, failed, client gone), so a vanished client never blocks the
// line.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

namespace deltafin {

class Admission {
public:
  explicit Admission(size_t queue) : queue_(queue) {}

  class Ticket {
  public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    // Waits until this ticket is first in line (polling `cancelled` every
    // 20 ms). False when cancelled while waiting: the place is given up.
    bool wait_turn(const std::function<bool()>& cancelled);
    // Gives the place back now (the destructor does it otherwise).
    void release();

  private:
    friend class Admission;
    Ticket(Admission* a, uint64_t number) : owner_(a), number_(number) {}
    Admission* owner_;
    uint64_t number_;
    bool released_ = false;
  };

  // A place in line, or nullptr when one is generating and `queue` wait.
  std::unique_ptr<Ticket> try_enter();

  struct Counts {
    size_t active = 0, waiting = 0, refused = 0;
  };
  Counts counts() const;

private:
  void leave(uint64_t number);

  const size_t queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_number_ = 0;
  // Tickets still in line, by number; the smallest holds the turn once it asks.
  std::vector<uint64_t> line_;
  size_t refused_ = 0;
};

}  // namespace deltafin
