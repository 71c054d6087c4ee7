// How to run a model: threads for everyone; for a store, the RAM given to the
// expert cache, the pinned tier, route lookahead and the reader's settings.
// Included by the engine boundary (engine.h), so it includes nothing from io/:
// the reader's settings are ReadSettings here, and the io/ReaderOptions the
// streaming source is opened with is made from them where the store is opened
// (load/family_loading.cpp: reader_options).
#pragma once

#include "backend/select/make_backend.h"

#include <cstdint>
#include <optional>
#include <string>

#include "model/common/route_lookahead.h"

namespace deltafin {

// Prompt rows per prefill slice (engine/prefill.h). Measured
// (bench/results/2026-11-30-prefill-chunk-sweep-512): a 512-token prompt,
// all experts resident, 2 threads: slices of 0 (one) / 256 / 128 / 64 rows
// took 49.3 / 44.6 / 42.1 / 45.4 s. A smaller slice's scratch (the
// [rows, 16, 3584] expert outputs: 117 MB at 512 rows) stays in cache; below
// 128 rows the batched products get too short (32 rows per expert here).
inline constexpr int64_t kDefaultPrefillChunk = 128;

// The expert reader's settings as a user gives them (io/expert_reader.h's
// ReaderOptions documents each; the defaults are the same).
struct ReadSettings {
  std::string io = "uring";           // "uring" or "pread" (parse_io_engine checks it)
  int queue_depth = 4;                // chunks in flight per drive
  int prefetch_depth = 1;             // of them, at most this many prefetch chunks
  uint64_t chunk_bytes = 4u << 20;    // multiple of 4096
  double prefetch_max_wait_s = 0.25;  // a prefetch queued this long goes ahead of demand once
  bool direct = true;                 // O_DIRECT; false = buffered (tests, tmpfs)
  int verify_threads = 0;             // 0 = one per drive, at most the CPU count
};

struct EngineOptions {
  int threads = 1;
  BackendChoice backend;  // what computes (--backend, --device, --device-memory)
  std::optional<double> cache_gb;  // GB (10^9) for the evictable cache; unset = auto (memory_plan.h)
  double pin_gb = 0;               // GB for the pinned tier of the hottest experts
  std::string cache_policy = "auto";  // the cache's eviction policy (experts/cache_policy.h)
  LookaheadMode lookahead = LookaheadMode::Auto;
  ReadSettings reader;
  std::string trace;               // JSON-lines read trace, "" = none
  std::string route_trace;         // every route, experts/route_trace.h; "" = none (resident or store)
  bool save_heat = true;           // write the updated heat histogram back to the store
  // Streamed stores (setup --stream): parallel downloads from the mirror and
  // an override of the store's disk budget for fetched experts (GB, 0 = none).
  int fetch_threads = 4;
  std::optional<double> disk_budget_gb;
};

// Where a model comes from: a Hugging Face checkpoint directory (every
// expert read into RAM) or a deltafin store (experts streamed, run as
// `options` says). Exactly one is given; options.threads and
// options.route_trace apply to both.
struct ModelSource {
  std::string checkpoint;
  std::string store;
  EngineOptions options;
};

}  // namespace deltafin
