// The io_uring backend: one thread owns the ring and keeps every started chunk
// in flight at once. Other threads hand it chunks through a mutex-protected
// list and wake it with an eventfd the ring polls, so the thread sleeps in
// io_uring_wait_cqe and never busy-waits.
//
// Opening a file (and its fstat size check) is done synchronously on the ring
// thread: ~2 us per chunk (see chunk_io.h), against the read's milliseconds.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "io/chunk_io.h"
#include "io/expert_reader.h"
#include "io/test_hooks.h"
#include "util/error.h"

// DELTAFIN_HAVE_URING is set by CMake when liburing was found at configure
// time (-DDELTAFIN_URING=OFF builds without it); without it, or off Linux,
// make_uring_backend says why and the reader uses the pread pool.
#if !defined(DELTAFIN_HAVE_URING)
#define DELTAFIN_HAVE_URING 0
#endif
#if defined(__linux__) && DELTAFIN_HAVE_URING
#define DELTAFIN_URING_BACKEND 1
#else
#define DELTAFIN_URING_BACKEND 0
#endif

#if DELTAFIN_URING_BACKEND
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#endif

namespace deltafin {

bool io_uring_built() { return DELTAFIN_URING_BACKEND != 0; }

namespace {
std::atomic<int> g_uring_init_error{0};
}  // namespace

void io_test_hooks::set_uring_init_error(int err) { g_uring_init_error.store(err); }

namespace io_detail {

#if DELTAFIN_URING_BACKEND

namespace {

class UringBackend final : public Backend {
public:
  UringBackend(std::vector<DriveFiles*> files, ChunkSink& sink) : files_(std::move(files)), sink_(sink) {}
  ~UringBackend() override {
    stop();
    if (ring_ok_) io_uring_queue_exit(&ring_);
    if (efd_ >= 0) ::close(efd_);
  }

  // Sets the ring up in place and starts its thread; false with *why set when
  // io_uring cannot be used here.
  bool init(unsigned entries, std::string* why) {
    if (int err = g_uring_init_error.load()) {
      *why = cat("io_uring_queue_init: ", std::strerror(err));
      return false;
    }
    int rc = io_uring_queue_init(entries, &ring_, 0);
    if (rc < 0) {
      *why = cat("io_uring_queue_init: ", std::strerror(-rc));
      return false;
    }
    ring_ok_ = true;
    io_uring_probe* probe = io_uring_get_probe_ring(&ring_);
    const bool can_read = probe && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                          io_uring_opcode_supported(probe, IORING_OP_POLL_ADD);
    if (probe) io_uring_free_probe(probe);
    if (!can_read) {
      *why = "the kernel's io_uring lacks IORING_OP_READ";
      return false;
    }
    // A seccomp filter may allow setup and refuse io_uring_enter: try one NOP.
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    io_uring_prep_nop(s);
    rc = io_uring_submit(&ring_);
    io_uring_cqe* cqe = nullptr;
    if (rc == 1) rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc < 0) {
      *why = cat("io_uring_enter: ", std::strerror(-rc));
      return false;
    }
    io_uring_cqe_seen(&ring_, cqe);
    efd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd_ < 0) {
      *why = cat("eventfd: ", std::strerror(errno));
      return false;
    }
    thread_ = std::thread([this] { run(); });
    return true;
  }

  void start(const ChunkJob& job) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(job);
    }
    wake();
  }

  void stop() override {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake();
    thread_.join();
  }

private:
  void wake() {
    const uint64_t one = 1;
    ssize_t r;
    do r = ::write(efd_, &one, sizeof one);
    while (r < 0 && errno == EINTR);  // EAGAIN: the counter is already non-zero, a wakeup is pending
  }

  io_uring_sqe* sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    while (!s) {  // the ring is sized for every chunk in flight; flush and retry all the same
      io_uring_submit(&ring_);
      s = io_uring_get_sqe(&ring_);
    }
    return s;
  }

  void arm_wakeup() {
    io_uring_sqe* s = sqe();
    io_uring_prep_poll_add(s, efd_, POLLIN);
    io_uring_sqe_set_data(s, nullptr);
  }

  void queue_read(ChunkRead* op) {
    io_uring_sqe* s = sqe();
    io_uring_prep_read(s, op->fd(), op->next_dst(), static_cast<unsigned>(op->next_len()), op->next_offset());
    io_uring_sqe_set_data(s, op);
  }

  void finish(ChunkRead* op, ChunkOutcome out) {
    const ChunkJob job = op->job();
    op->end();
    delete op;
    --in_flight_;
    sink_.chunk_finished(job, std::move(out));  // may start more chunks: they land in pending_
  }

  void run() {
    arm_wakeup();
    std::deque<ChunkJob> jobs;
    std::vector<std::pair<void*, int>> done;
    for (;;) {
      bool stop;
      {
        std::lock_guard<std::mutex> lock(mu_);
        jobs.swap(pending_);
        stop = stop_;
      }
      for (const ChunkJob& job : jobs) {
        auto* op = new ChunkRead(job);
        ++in_flight_;
        ChunkOutcome out;
        if (!op->begin(*files_[static_cast<size_t>(job.drive)], &out)) {
          finish(op, std::move(out));
        } else if (op->next_len() == 0) {
          finish(op, {true, 0, {}});  // a zero-byte record
        } else {
          queue_read(op);
        }
      }
      jobs.clear();
      io_uring_submit(&ring_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!pending_.empty()) continue;
        if (stop && in_flight_ == 0) break;
      }

      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc < 0) continue;  // -EINTR
      unsigned head, n = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        done.emplace_back(io_uring_cqe_get_data(cqe), cqe->res);
        ++n;
      }
      io_uring_cq_advance(&ring_, n);
      for (auto [data, res] : done) {
        if (!data) {  // the eventfd: clear it and poll again
          uint64_t v;
          while (::read(efd_, &v, sizeof v) < 0 && errno == EINTR) {
          }
          arm_wakeup();
          continue;
        }
        auto* op = static_cast<ChunkRead*>(data);
        ChunkOutcome out;
        if (op->advance(res, &out))
          finish(op, std::move(out));
        else
          queue_read(op);  // the rest of a short read
      }
      done.clear();
    }
  }

  std::vector<DriveFiles*> files_;
  ChunkSink& sink_;
  io_uring ring_{};
  bool ring_ok_ = false;
  int efd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::deque<ChunkJob> pending_;
  bool stop_ = false;
  size_t in_flight_ = 0;  // ring thread only
};

}  // namespace

std::unique_ptr<Backend> make_uring_backend(std::vector<DriveFiles*> files, int queue_depth, ChunkSink& sink,
                                            std::string* why) {
  unsigned entries = 8;
  while (entries < files.size() * static_cast<size_t>(queue_depth) + 2) entries *= 2;
  auto backend = std::make_unique<UringBackend>(std::move(files), sink);
  if (!backend->init(entries, why)) return nullptr;
  return backend;
}

#else  // no io_uring outside Linux, or a build without liburing

std::unique_ptr<Backend> make_uring_backend(std::vector<DriveFiles*>, int, ChunkSink&, std::string* why) {
#if defined(__linux__)
  *why = "this build has no io_uring: liburing was not found (or DELTAFIN_URING=OFF) at configure time";
#else
  *why = "io_uring exists only on Linux";
#endif
  return nullptr;
}

#endif

}  // namespace io_detail
}  // namespace deltafin
