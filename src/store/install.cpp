#include "store/install.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "store/store_files.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }
}  // namespace

struct InterruptGuard::Saved {
  struct sigaction old_int{}, old_term{};
};

InterruptGuard::InterruptGuard() : saved_(std::make_unique<Saved>()) {
  g_interrupted = false;
  struct sigaction sa{};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &saved_->old_int);
  ::sigaction(SIGTERM, &sa, &saved_->old_term);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &saved_->old_int, nullptr);
  ::sigaction(SIGTERM, &saved_->old_term, nullptr);
}

bool interrupt_requested() { return g_interrupted.load(); }

void check_interrupt() {
  if (g_interrupted)
    fail("interrupted (Ctrl-C): finished files are kept and nothing half-written is left; rerun the same command to resume");
}

std::string store_lock_path(const std::string& store) { return store + "/setup.lock"; }

namespace {

// EWOULDBLOCK is the answer "someone holds it"; anything else is a fault.
bool try_flock(int fd, int op, const std::string& path) {
  if (::flock(fd, op | LOCK_NB) == 0) return true;
  if (errno != EWOULDBLOCK) fail(path, ": cannot lock: ", std::strerror(errno));
  return false;
}

}  // namespace

StoreLock::StoreLock(const std::string& store, const StoreLockWait& wait) {
  const std::string path = store_lock_path(store);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path, ": cannot create the setup lock file: ", std::strerror(errno));
  try {
    if (try_flock(fd_, LOCK_EX, path)) return;
    // Held. Exclusively: another setup, refused. Shared only: runs writing
    // one file each (a heat histogram, a fetched expert), waited for.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait.seconds);
    for (bool told = false;; std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
      if (try_flock(fd_, LOCK_EX, path)) return;
      if (!try_flock(fd_, LOCK_SH, path))
        fail(store, ": another deltafin setup is writing this store (", path, " is locked)");
      ::flock(fd_, LOCK_UN);
      if (std::chrono::steady_clock::now() >= give_up)
        fail(store, ": a deltafin run, serve or prefetch kept writing into this store for ", wait.seconds, " s (", path,
             " is held shared while it writes its heat histogram or a fetched expert); stop it and rerun setup");
      if (!told && wait.on_wait) wait.on_wait();
      told = true;
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

StoreLock::~StoreLock() { ::close(fd_); }

StoreWriteLock::StoreWriteLock(const std::string& store) {
  const std::string path = store_lock_path(store);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  // flock needs no write access: a store this process may only read still has
  // its lock file (every setup makes one).
  if (fd_ < 0) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, ": cannot open the store's lock file: ", std::strerror(errno));
  try {
    held_ = try_flock(fd_, LOCK_SH, path);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

StoreWriteLock::~StoreWriteLock() { ::close(fd_); }

bool has_size(const std::string& path, uint64_t bytes) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == bytes && !ec;
}

Sha256Digest write_verified(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                            uint64_t expect_bytes) {
  Sha256 h;
  {
    AtomicFile f(path);  // destroyed before commit (an exception, Ctrl-C): the temporary is removed
    produce([&](const uint8_t* p, size_t n) {
      check_interrupt();
      f.write(p, n);
      h.update(p, n);
    });
    check_interrupt();
    if (f.written() != expect_bytes) fail(path, ": wrote ", f.written(), " bytes, expected ", expect_bytes);
    f.commit();
  }
  const Sha256Digest want = h.finish();
  if (hash_file(path, /*drop_cache=*/true) != want) {
    ::unlink(path.c_str());
    fail(path, ": read back after writing, the file's SHA-256 differs from the bytes written (removed; the drive "
               "returned other bytes than it was given)");
  }
  return want;
}

}  // namespace deltafin
