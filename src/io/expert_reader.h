// The expert reader (design.md §4): direct reads of whole expert files from
// several drives, with per-drive queues, demand before prefetch, replica
// choice by expected completion time, and fault handling.
//
// A read is cut into chunks (chunk_bytes, 4 KiB multiples). Each chunk goes to
// one of the expert's replica drives, chosen when it is dispatched by the
// drive's expected completion time (queued bytes / estimated bandwidth), so an
// unreplicated expert keeps its drive's queue full with several chunks in
// flight and a replicated one may be split across its replicas.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/monitor.h"

namespace deltafin {

enum class IoEngine { Uring, Pread };
enum class ReadPriority { Demand, Prefetch };

const char* io_engine_name(IoEngine e);
IoEngine parse_io_engine(const std::string& name);  // "uring" | "pread", else a named error
// Whether this build has the io_uring backend (liburing found at configure time, on Linux).
bool io_uring_built();

struct DriveSpec {
  std::string path;              // the drive's root (for messages)
  double read_bytes_per_s = 1e9; // starting bandwidth estimate (setup's probe)
};

struct ReaderOptions {
  IoEngine engine = IoEngine::Uring;  // falls back to Pread, with engine_note(), where io_uring is refused
  int queue_depth = 4;                // chunks in flight per drive
  // At most this many of them prefetch chunks: a demand read arriving at a
  // drive busy with prefetches waits for fewer bytes ahead of it.
  int prefetch_depth = 1;
  uint64_t chunk_bytes = 4u << 20;    // multiple of 4096
  double prefetch_max_wait_s = 0.25;  // a prefetch queued this long goes ahead of demand once
  bool direct = true;                 // O_DIRECT; false = buffered + POSIX_FADV_DONTNEED (tests, tmpfs)
  int verify_threads = 0;             // threads that check CRC-32C and call on_done; 0 = one per drive, at most the CPU count
};

struct ReadResult {
  uint64_t ticket = 0;
  bool ok = false;
  bool cancelled = false;
  std::string error;  // names layer, expert, every drive tried and its path, and what failed
  // ok, but only after other replicas failed: what failed on them (same form
  // as error), so a bad copy can be reported and repaired; else "".
  std::string recovered;
};

struct ReadRequest {
  int64_t layer = 0, expert = 0;
  ReadPriority priority = ReadPriority::Demand;
  std::vector<int> drives;          // replica drives (indexes into the reader's drives), first = primary
  std::vector<std::string> paths;   // the expert file on each replica drive
  uint64_t bytes = 0;               // exact record size; the file must hold exactly this many
  uint8_t* dest = nullptr;          // 4096-aligned, capacity round_up_direct(bytes)
  std::optional<uint32_t> crc32c;   // when set, checked; a mismatch is a failed read of that replica
  // Called exactly once per submitted request (ok, failed or cancelled), on a
  // reader thread, after the last byte is in dest; must not block. It may call
  // submit/promote/cancel (no reader lock is held), never ~ExpertReader. A
  // cancelled read's on_done also comes on a reader thread, possibly after
  // cancel() returned; dest was not written.
  std::function<void(const ReadResult&)> on_done;
};

struct DriveStatus {
  std::string path;
  double est_bytes_per_s = 0;   // updated from completions
  uint64_t queued_bytes = 0;    // queued + in flight (queued: chunks that can only go to this drive)
  int in_flight = 0;            // chunks
  bool direct = true;           // false: reads are buffered (asked for, or direct I/O was refused)
  std::string note;             // why direct I/O is not used on this drive, or ""
  DriveCounters counters;
};

class ExpertReader {
public:
  ExpertReader(std::vector<DriveSpec> drives, ReaderOptions options, Monitor* monitor);
  ~ExpertReader();  // cancels queued prefetches, waits for everything started
  ExpertReader(const ExpertReader&) = delete;
  ExpertReader& operator=(const ExpertReader&) = delete;

  // Queues a read; returns its ticket (never 0). A malformed request (drives
  // and paths differ in count, a bad drive index, a null or unaligned dest)
  // throws and is not submitted (no on_done).
  uint64_t submit(ReadRequest request);
  // A queued or running prefetch is now needed: its remaining chunks move to
  // the demand queues. No-op for demand reads or finished tickets.
  void promote(uint64_t ticket);
  // Drops a prefetch none of whose chunks has started (on_done gets
  // cancelled = true) and returns true; false when it started or finished, or
  // is a demand read (a promoted prefetch counts as demand).
  bool cancel(uint64_t ticket);
  // Like cancel(), but also for a prefetch that has started: no further chunk
  // of it is read, and on_done (cancelled = true) comes once its chunks in
  // flight have landed. False for demand or promoted reads, reads whose bytes
  // have all landed, and finished tickets.
  bool abort(uint64_t ticket);

  // Test hook: while paused nothing new starts (chunks in flight finish), so
  // a test can queue reads and then release them in one go. The destructor
  // resumes.
  void pause_dispatch(bool paused);

  IoEngine engine() const;
  const std::string& engine_note() const;  // why the requested engine was not used, or ""
  std::vector<DriveStatus> drive_status() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deltafin
