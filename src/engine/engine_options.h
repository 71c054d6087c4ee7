// How to run a model: threads for everyone; for a store, the RAM given to the
// expert cache, the pinned tier, route lookahead and the reader's settings.
#pragma once

#include <optional>
#include <string>

#include "io/expert_reader.h"
#include "model/common/route_lookahead.h"

namespace deltafin {

struct EngineOptions {
  int threads = 1;
  std::optional<double> cache_gb;  // GB (10^9) for the evictable cache; unset = auto (memory_plan.h)
  double pin_gb = 0;               // GB for the pinned tier of the hottest experts
  LookaheadMode lookahead = LookaheadMode::Auto;
  ReaderOptions reader;
  std::string trace;               // JSON-lines read trace, "" = none
  bool save_heat = true;           // write the updated heat histogram back to the store
  // Streamed stores (setup --stream): parallel downloads from the mirror and
  // an override of the store's disk budget for fetched experts (GB, 0 = none).
  int fetch_threads = 4;
  std::optional<double> disk_budget_gb;
};

}  // namespace deltafin
