// The options every command that runs a model shares: where the model comes
// from (--model for a checkpoint with everything resident, --store for a
// deltafin store with streamed experts) and how a store is run.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "load/engine_options.h"

namespace deltafin {
struct LoadedModel;
struct EngineSettings;
}

namespace deltafin::cli {

struct ModelArgs {
  std::string model, store;
  int threads = 1;
  std::optional<double> cache_gb;
  double pin_gb = 0;
  std::string cache_policy;  // "" = the default (EngineOptions)
  std::string lookahead = "auto", io = "uring", trace, route_trace;
  int queue_depth = 4, prefetch_depth = 1;
  double chunk_mb = 4;
  bool buffered = false;
  int fetch_threads = 4;
  std::optional<double> disk_budget_gb;
  BackendChoice backend = backend_choice_from_env();  // --backend, --device, --device-memory
};

void add_model_options(CLI::App* sub, ModelArgs& a);

// Prompt states on disk (engine/prompt_disk_cache.h), for run and serve.
struct PromptCacheArgs {
  std::string dir;       // --prompt-cache-dir
  double disk_gb = 10;   // --prompt-cache-disk-gb; 0 = none
  // Where the states go: --prompt-cache-dir, else STORE/prompt-cache for a
  // store run; "" (none) for a checkpoint run without one, or a zero budget.
  std::string dir_for(const ModelArgs& m) const;
  uint64_t budget_bytes() const { return static_cast<uint64_t>(disk_gb * 1e9); }
};
void add_prompt_cache_options(CLI::App* sub, PromptCacheArgs& a);

// What one request's session may hold, for run and serve: --context and
// --session-budget-mb, checked against each other when the engine starts.
struct SessionArgs {
  int64_t context = 0;           // 0 = what the budget holds, at most the model's
  double session_budget_mb = 0;  // 0 = derived from the RAM left (engine/engine.cpp)
  void apply(EngineSettings& so) const;
};
void add_session_options(CLI::App* sub, SessionArgs& a);
// What --model or --store names (exactly one must be given), with the
// store run's options.
ModelSource model_source(const ModelArgs& a);
// Loads it, of the family its config.json names (for `bench`, which measures
// the engine's parts from below the engine boundary).
std::unique_ptr<LoadedModel> load_model(const ModelArgs& a);

}  // namespace deltafin::cli
