// Filling a streamed store's drives ahead of use: `deltafin prefetch` and the
// expert phase of `setup --full`. Resumable by construction: experts already
// on their drives are skipped, and each fetched one is installed atomically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "remote/expert_fetcher.h"
#include "store/store_manifest.h"

namespace deltafin {

struct PrefetchRange {
  // Inclusive layer numbers; only the MoE layers among them have experts.
  // first_layer -1 = the first MoE layer, last_layer -1 = the last.
  int64_t first_layer = -1, last_layer = -1;
};

struct PrefetchReport {
  uint64_t fetched = 0, already_local = 0;
  uint64_t bytes_received = 0;  // HTTP body bytes, all attempts
  uint64_t retries = 0;
  double seconds = 0;
};

// The MXFP4 matrices of a record, for the fetcher's structure check: each
// U8 part [rows, cols/2] followed by a U8 part [rows, cols/32] is one matrix
// (its packed nibbles, then its scales: K3's w1, w2, w3). A record without
// them (Qwen3-MoE's BF16 experts) has none, and fetched bytes are checked by
// hash alone.
std::vector<ExpertMatrixShape> mxfp4_matrices(const std::vector<RecordPart>& record);

// Fetches every remote expert of layers [first, last] not yet on its drives,
// `fetch.threads` at a time, with a progress line (unless quiet). Stops at the
// first failure with its error; Ctrl-C stops after the fetches in flight.
// Refuses to start when the experts would not fit the disk budget.
PrefetchReport prefetch_experts(const std::string& store_dir, const StoreManifest& m, PrefetchRange range,
                                FetchOptions fetch, bool quiet);

}  // namespace deltafin
