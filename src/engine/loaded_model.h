// Everything needed to run a K3-architecture model: the config, the spine in
// RAM, an expert source, the tokenizer and the model. Two ways in: a Hugging
// Face checkpoint directory with every expert read into RAM (resident, the
// reference), or a deltafin store whose experts stream from its drives.
#pragma once

#include <memory>
#include <string>

#include "engine/engine_options.h"
#include "engine/memory_plan.h"
#include "engine/streaming_source.h"
#include "format/k3_checkpoint.h"
#include "model/kimi_k3/lookahead.h"
#include "model/kimi_k3/model.h"
#include "store/heat.h"
#include "store/store_manifest.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace deltafin {

// Members are destroyed in reverse order: the model and lookahead before the
// expert source, the source (and its reader threads) before the monitor and
// heat histogram it reports into. Keep that order when adding members.
struct LoadedK3 {
  K3Config config;
  std::string spine_format = "bf16";  // "bf16" or "int8-row" (not weight-exact, always announced)
  // Store runs only: manifest, heat, monitor, memory plan.
  std::string store_dir;
  std::unique_ptr<StoreManifest> manifest;
  std::unique_ptr<HeatHistogram> heat;
  std::unique_ptr<Monitor> monitor;
  MemoryPlan memory;

  K3Weights weights;
  std::unique_ptr<ExpertSource> experts;
  StreamingExpertSource* stream = nullptr;  // = experts when streaming
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<RouteLookahead> lookahead;
  std::unique_ptr<K3Model> model;
  double load_seconds = 0;
  // SHA-256 (hex) of what decides the numerics: config.json and the weights'
  // identity (a checkpoint's index and shard sizes, or a store's store.json,
  // which names the spine format and every expert's hash). Prompt states
  // kept on disk (engine/prompt_disk_cache.h) are only ever used by a model
  // with the same fingerprint.
  std::string fingerprint;

  // Writes the heat histogram back to the store (atomically), if streaming.
  void save_heat();
  // One line for outputs that report configuration: spine format (with the
  // int8-row warning), experts source, cache, lookahead, I/O engine.
  std::string describe() const;
};

std::unique_ptr<LoadedK3> load_k3_resident(const std::string& dir, int threads);
std::unique_ptr<LoadedK3> load_k3_store(const std::string& store_dir, const EngineOptions& options);

}  // namespace deltafin
