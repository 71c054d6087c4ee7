// Up to `parallel` generations at once, up to `queue` more waiting in
// arrival order, and a refusal (HTTP 429) beyond that. A ticket is a place in
// that line: it is taken before any work starts, and given back when its
// request ends for any reason (served, failed, client gone), so a vanished
// client never blocks the line.
//
// Memory: each ticket carries the session bytes its request may hold (its
// prompt and its tokens to come, Engine::session_bytes), and running tickets
// together stay within the session budget. The line is first come, first
// served: the oldest waiting request starts first, and one that waits for
// memory holds back the requests behind it, so a large request is never
// starved by a stream of small ones.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace deltafin {

class Admission {
public:
  // budget_bytes 0: memory is not counted.
  explicit Admission(size_t queue, size_t parallel = 1, uint64_t budget_bytes = 0)
      : queue_(queue), parallel_(parallel < 1 ? 1 : parallel), budget_(budget_bytes) {}

  class Ticket {
  public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    // Waits until this ticket may run (polling `cancelled` every 20 ms).
    // False when cancelled while waiting: the place is given up.
    bool wait_turn(const std::function<bool()>& cancelled);
    // Gives the place back now (the destructor does it otherwise).
    void release();

  private:
    friend class Admission;
    Ticket(Admission* a, uint64_t number, uint64_t bytes) : owner_(a), number_(number), bytes_(bytes) {}
    Admission* owner_;
    uint64_t number_, bytes_;
    bool released_ = false;
  };

  // A place in line, or nullptr when `parallel` are running and `queue` wait.
  std::unique_ptr<Ticket> try_enter(uint64_t bytes = 0);

  struct Counts {
    size_t active = 0, waiting = 0, refused = 0;
    uint64_t active_bytes = 0;  // the running requests' session bytes (as admitted)
  };
  Counts counts() const;
  size_t parallel() const { return parallel_; }

private:
  struct Place {
    uint64_t number, bytes;
  };
  bool may_start(uint64_t number) const;  // under mu_
  void leave(uint64_t number);

  const size_t queue_, parallel_;
  const uint64_t budget_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_number_ = 0;
  std::vector<Place> waiting_, running_;  // waiting_ in arrival order
  uint64_t running_bytes_ = 0;
  size_t refused_ = 0;
};

}  // namespace deltafin
