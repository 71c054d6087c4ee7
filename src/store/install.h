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

// Exclusive lock on a store (store/setup.lock), so two setups cannot write it
// at once, nor remove each other's temporary files.
class StoreLock {
public:
  explicit StoreLock(const std::string& store);
  ~StoreLock();
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

private:
  int fd_ = -1;
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
