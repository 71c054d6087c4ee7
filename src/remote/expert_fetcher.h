// Fetching a streamed store's experts from its mirror (design.md §3,
// --stream). An expert not on its drive is fetched by range requests of its
// tensors (offsets from remote/experts.bin), checked (exact length, MXFP4
// structure, and the SHA-256 recorded at its first fetch), written
// atomically to the drive(s) its placement names and handed to the caller's
// buffer. Several experts download in parallel (one keep-alive connection
// per worker); demand fetches go before prefetches.
//
// --disk-budget: fetched experts may take at most this many bytes of the
// drives; to make room the coldest (heat histogram) are deleted — never one
// being read, never a spine file (those are not the fetcher's). When every
// candidate is in use the fetched bytes are still used, just not kept.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/expert_reader.h"
#include "store/hash_journal.h"
#include "remote/http_client.h"
#include "store/heat.h"
#include "store/store_manifest.h"

namespace deltafin {

// One matrix of an expert record, for the MXFP4 structure check of fetched bytes.
struct ExpertMatrixShape {
  uint64_t rows = 0, cols = 0;  // logical (cols = 2 x packed bytes per row)
};

struct FetchOptions {
  int threads = 4;                 // parallel downloads
  HttpOptions http;
  int content_attempts = 3;        // whole-expert refetches when the bytes fail a check
  std::optional<uint64_t> disk_budget_bytes;  // overrides the manifest's (0 = no limit)
  // w1, w2, w3 of a record (packed then scale each), for validate_mxfp4; empty = skip the check.
  std::vector<ExpertMatrixShape> matrices;
};

struct FetchCounters {
  uint64_t fetched = 0;        // experts fetched and checked
  uint64_t bytes = 0;          // body bytes received (all attempts)
  uint64_t failed = 0;         // fetches that ended in an error
  uint64_t refused = 0;        // fetched copies refused (hash or structure), refetched or failed
  uint64_t retries = 0;        // HTTP attempts retried
  uint64_t evicted = 0, evicted_bytes = 0;
  uint64_t not_kept = 0;       // used but not installed: no room in the budget, or the drive write failed
  uint64_t install_failed = 0; // of those, drive writes that failed (last_install_error says why)
  uint64_t evict_failed = 0;   // evicted files that could not be deleted (left as strays)
  std::string last_install_error;
  double seconds = 0;          // summed fetch time (parallel fetches overlap)
};

struct FetchRequest {
  int64_t layer = 0, expert = 0;
  ReadPriority priority = ReadPriority::Demand;
  uint8_t* dest = nullptr;     // room for the manifest's expert_bytes
  // Called once, on a fetch thread, after dest holds the checked bytes (or on
  // failure / cancel). Must not block.
  std::function<void(const ReadResult&)> on_done;
};

class ExpertFetcher {
public:
  ExpertFetcher(const std::string& store_dir, const StoreManifest& m, FetchOptions options);
  ~ExpertFetcher();  // cancels queued fetches, waits for running ones
  ExpertFetcher(const ExpertFetcher&) = delete;
  ExpertFetcher& operator=(const ExpertFetcher&) = delete;

  // Whether the expert's file is on every drive its placement names.
  bool is_local(int64_t layer, int64_t expert) const;
  // Protects a local expert from eviction while it is read; false when it is
  // not local (fetch it). Each true is paired with release_local().
  bool hold_local(int64_t layer, int64_t expert);
  void release_local(int64_t layer, int64_t expert);
  // The hash recorded for the expert (by setup or at first fetch).
  std::optional<ExpertHash> hash(int64_t layer, int64_t expert) const;

  uint64_t submit(FetchRequest request);  // ticket, never 0
  void promote(uint64_t ticket);          // a queued prefetch becomes demand
  bool cancel(uint64_t ticket);           // a queued prefetch is dropped (on_done: cancelled)

  // Heat used to choose eviction victims (copied; call from the thread that owns heat).
  void set_heat(const HeatHistogram& heat);

  FetchCounters counters() const;
  uint64_t disk_used_bytes() const;
  uint64_t disk_budget_bytes() const;  // 0 = no limit
  size_t local_experts() const;
  const std::string& url() const;
  // Torn hash slots found at start (reported by the caller).
  const std::vector<std::string>& damaged_hash_slots() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deltafin
