// deltafin setup --stream / --full: a store whose experts come from a mirror
// that serves the checkpoint's files as URL/<file>.
//
// --stream moves only what the spine needs: the config, tokenizer and index
// files, each shard's safetensors header, and the non-expert tensors (range
// requests), then writes the spine and a manifest whose expert placements
// are marked remote (fetched on first use by remote/expert_fetcher).
// --full does the same and then fetches every expert through the same
// fetcher, ending with a complete local store.
#pragma once

#include <cstdint>
#include <string>

#include "remote/expert_fetcher.h"
#include "store/setup.h"

namespace deltafin {

struct StreamSetupOptions {
  SetupOptions setup;          // from is ignored (the mirror's small files go to store/remote/source)
  std::string source_url;
  bool full = false;
  uint64_t disk_budget_bytes = 0;  // 0 = no limit (required for --full)
  FetchOptions fetch;
};

struct StreamSetupReport {
  SetupReport setup;
  uint64_t checkpoint_bytes = 0;  // every file of the checkpoint on the mirror
  uint64_t fetched_bytes = 0;     // what setup moved (before --full's experts)
  uint64_t requests = 0;
  std::string checksums;          // the mirror's published hash list used, or ""
  uint64_t experts_fetched = 0, expert_bytes_fetched = 0;  // --full
};

StreamSetupReport run_stream_setup(const StreamSetupOptions& options);

}  // namespace deltafin
