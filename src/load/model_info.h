// What a loaded model is and where its experts come from, as data
// (LoadedModel::info(), Engine::model_info()); bench/run_report.h's
// describe_model and load_report make the lines that report it. Included by
// the engine boundary, so nothing here comes from io/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "experts/memory_plan.h"
#include "model/common/route_lookahead.h"

namespace deltafin {

// Where a streamed model's experts come from.
struct StreamInfo {
  size_t drives = 0;
  LookaheadMode lookahead = LookaheadMode::Off;
  std::string io_engine;  // the reader's engine in use ("uring", "pread")
  std::string io_note;    // why the reader uses another engine than asked ("" = none)
  std::string cache_policy = "cycle-heat";  // the expert cache's eviction policy
  std::string cache_policy_why;             // --cache-policy auto: the reason for its choice
  struct Mirror {
    std::string url;
    uint64_t local_experts = 0;      // experts on the drives
    uint64_t disk_budget_bytes = 0;  // 0 = none
  };
  std::optional<Mirror> mirror;      // a store whose missing experts are fetched
};

// The model as loaded.
struct ModelInfo {
  std::string family;                 // FamilyInfo::name
  std::string spine_format = "bf16";  // "bf16", "fp8" (as released) or "int8-row" (not weight-exact)
  double load_seconds = 0;
  MemoryPlan memory;                  // a streamed store's (all 0 resident)
  uint64_t expert_bytes = 0;          // one expert record (0 resident)
  std::optional<StreamInfo> stream;   // none: every expert resident
  // Where the model computes, when not on the CPU backend ("" on the CPU):
  // the device, and the parts' placement and traffic so far
  // (backend/select/make_backend.h backend_placement).
  std::string compute, compute_stats;
  bool weight_exact() const { return spine_format != "int8-row"; }
};

}  // namespace deltafin
