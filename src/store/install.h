// Writing store files so that a crash or Ctrl-C never leaves a wrong one:
// every file goes through AtomicFile (temporary name, fsync, rename), is read
// back from the drive and checked against the hash of the bytes given; Ctrl-C
// only raises a flag that the write loops check between chunks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "util/sha256.h"

namespace deltafin {

// While alive, SIGINT and SIGTERM set a flag instead of ending the process;
// the previous handlers come back when it dies.
class InterruptGuard {
public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

private:
  struct Saved;
  std::unique_ptr<Saved> saved_;
};

// Throws a deltafin::Error saying the work was interrupted once the flag is set.
void check_interrupt();
// The flag itself (for loops that must stop without throwing, e.g. a transfer).
bool interrupt_requested();

// store/setup.lock, the one lock of a store: an flock(2), which the kernel
// drops when its holder dies, even by SIGKILL, so it is never stale. setup
// holds it exclusively for its whole run (StoreLock); every other process that
// writes files into the store directory, store/remote or a drive's
// deltafin-experts tree (a run's or serve's heat histogram, the mirror
// fetcher's expert installs and its hash journal) holds it shared while a
// temporary file of its own exists there (StoreWriteLock). So while setup
// holds it, every "*.tmp-<pid>" in those places is a dead writer's, whatever
// process the pid names now (pids are reused: a temporary of a setup killed
// with SIGKILL can carry the pid of a live, unrelated process).
std::string store_lock_path(const std::string& store);  // store/setup.lock

struct StoreLockWait {
  // How long setup waits for shared holders (runs writing one file each) to
  // finish before giving up. Another setup (an exclusive holder) is refused
  // at once: it may run for hours.
  double seconds = 60;
  // Called once when setup starts waiting (to say so).
  std::function<void()> on_wait;
};

// setup's exclusive hold, so two setups cannot write a store at once, nor
// remove each other's temporary files; throws naming who holds it.
class StoreLock {
public:
  explicit StoreLock(const std::string& store, const StoreLockWait& wait = {});
  ~StoreLock();
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

private:
  int fd_ = -1;
};

// A writer's shared hold, taken without waiting: held() is false while a
// setup holds the store (it is rewriting it), and the caller then writes
// nothing. Throws only when the lock file cannot be opened (a store
// directory the process cannot use), naming it.
class StoreWriteLock {
public:
  explicit StoreWriteLock(const std::string& store);
  ~StoreWriteLock();
  StoreWriteLock(const StoreWriteLock&) = delete;
  StoreWriteLock& operator=(const StoreWriteLock&) = delete;
  bool held() const { return held_; }

private:
  int fd_ = -1;
  bool held_ = false;
};

// True when path is a regular file of exactly `bytes` bytes: a cheap
// "probably finished" (the hash decides).
bool has_size(const std::string& path, uint64_t bytes);

using ByteSink = std::function<void(const uint8_t*, size_t)>;

// Writes path atomically with the bytes `produce` feeds to its sink (checking
// for Ctrl-C between pieces), reads the file back from the drive and compares
// hashes; a mismatch removes the file and throws. Returns the SHA-256.
Sha256Digest write_verified(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                            uint64_t expect_bytes);

}  // namespace deltafin
