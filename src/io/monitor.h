// The read monitor (design.md §4): per drive, bytes completed in 10 ms bins;
// per read, what was read from where, at which priority, and when. Memory stays
// bounded at K3 scale (1,472 reads per cold token): per-read records are
// streamed to the trace file as they happen (when one is open) and only
// counters and bins are kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace deltafin {

// One expert read (or one cache hit, with cache_hit set and no drive).
struct ReadRecord {
  int64_t layer = 0, expert = 0;
  int drive = -1;              // the drive that served the most bytes; -1 for a hit
  std::vector<int> drives;     // every drive that served a part (a split read has several)
  bool prefetch = false;       // submitted as a prefetch
  bool promoted = false;       // a prefetch the engine then demanded
  bool cache_hit = false;
  bool ok = true;
  bool cancelled = false;
  double enqueue_s = 0, start_s = 0, end_s = 0;  // seconds on the monitor's clock
  uint64_t bytes = 0;
  std::string error;           // when !ok; for an ok read, what failed on replicas tried first (or "")
};

struct DriveCounters {
  uint64_t bytes = 0;          // completed bytes
  uint64_t reads = 0;          // completed chunks
  double busy_s = 0;           // time with at least one read in flight
};

class Monitor {
public:
  explicit Monitor(size_t drives, double bin_seconds = 0.010);
  ~Monitor();

  // Seconds since the monitor was made (steady clock).
  double now() const;

  // Opens a JSON-lines trace (one object per read or hit, written as they
  // happen, buffered); throws naming the path. Fields: t ("read"|"hit"),
  // layer, expert, drive, drives, prefetch, promoted, ok, cancelled,
  // enqueue_s, start_s, end_s, bytes (the record's size), and error when
  // a read failed or succeeded only on another replica.
  void open_trace(const std::string& path);
  // Flushes and closes; throws naming the path when a write failed.
  void close_trace();

  // A chunk of `bytes` finished on `drive` at `end_s`: feeds the 10 ms bins.
  void chunk_done(int drive, double end_s, uint64_t bytes);
  // Busy-time accounting: a drive went from idle to busy or back.
  void drive_busy(int drive, double t, bool busy);
  void read_done(const ReadRecord& record);
  void cache_hit(int64_t layer, int64_t expert);

  std::vector<DriveCounters> drive_counters() const;
  // bins[d][i]: bytes drive d completed in [i, i+1) * bin_seconds.
  std::vector<std::vector<uint64_t>> drive_bins() const;
  double bin_seconds() const { return bin_s_; }

private:
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point t0_;
  double bin_s_;
  std::vector<DriveCounters> counters_;
  std::vector<std::vector<uint64_t>> bins_;
  std::vector<double> busy_since_;  // < 0 when idle
  std::FILE* trace_ = nullptr;
  std::string trace_path_;
  std::string trace_buf_;      // lines not yet written (flushed at ~1 MiB and at close)
  bool trace_failed_ = false;  // a write failed; close_trace() reports it

  void trace_line(const std::string& line);  // with mu_ held
  void flush_trace();                         // with mu_ held
};

}  // namespace deltafin
