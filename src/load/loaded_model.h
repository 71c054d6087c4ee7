// Everything needed to run a model of any family: the spine in RAM, an expert
// source, the tokenizer and the model behind the family interface
// (model/common/causal_model.h). Two ways in: a Hugging Face checkpoint
// directory with every expert read into RAM (resident, the reference), or a
// deltafin store whose experts stream from its drives. LoadedModel holds
// what every family has; each family's loader (src/model/<family>/load/)
// adds its own config, weights and model in a derived struct, and the
// registry's loaders (model/loaders/family_loaders.h) pick the family from
// config.json or store.json.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "load/engine_options.h"
#include "experts/memory_plan.h"
#include "experts/route_trace.h"
#include "load/model_info.h"
#include "experts/streaming_source.h"
#include "backend/backend.h"
#include "model/common/causal_model.h"
#include "model/common/chat_format.h"
#include "model/registry.h"
#include "store/heat.h"
#include "store/store_manifest.h"
#include "tokenizer/token_text.h"
#include "util/thread_pool.h"

namespace deltafin {

// A derived class's members are destroyed before these, so a family's model
// and weights go before the expert source, and the source (and its reader
// threads) before the monitor and heat histogram it reports into. Keep that
// order when adding members.
struct LoadedModel {
  virtual ~LoadedModel();
  const FamilyInfo* family = nullptr;
  std::string spine_format = "bf16";  // "bf16", "fp8" (DeepSeek-V3 family, as released) or "int8-row" (not weight-exact, always announced)
  // Store runs only: manifest, heat, monitor, memory plan.
  std::string store_dir;
  std::unique_ptr<StoreManifest> manifest;
  std::unique_ptr<HeatHistogram> heat;
  std::unique_ptr<Monitor> monitor;
  MemoryPlan memory;
  // --route-trace: told every route by `experts`, committed when the model goes.
  std::unique_ptr<RouteTraceWriter> route_trace;

  std::string cache_policy_why;  // --cache-policy auto: why it chose its policy

  std::unique_ptr<ExpertSource> experts;
  StreamingExpertSource* stream = nullptr;  // = experts when streaming
  std::unique_ptr<TokenText> text;          // the family's tokenizer as ordinary text
  std::vector<uint32_t> eos;                // where a raw generation stops, the usual token first (none: only at the budget)
  std::unique_ptr<ThreadPool> pool;
  // What the model computes on (backend/select/make_backend.h): the CPU
  // backend over `pool`, or a Vulkan device. The family's model (a derived
  // member) goes first.
  std::unique_ptr<Backend> backend;
  double load_seconds = 0;
  // SHA-256 (hex) of what decides the numerics: config.json and the weights'
  // identity (a checkpoint's index and shard sizes, or a store's store.json,
  // which names the spine format and every expert's hash). Prompt states
  // kept on disk (engine/prompt_disk_cache.h) are only ever used by a model
  // with the same fingerprint.
  std::string fingerprint;

  virtual CausalModel& causal() = 0;
  const ModelSummary& summary() { return causal().summary(); }
  virtual const RouteLookaheadReport* route_lookahead() const { return nullptr; }
  // The family's chat format (template and answer parser); nullptr, with
  // chat_missing() saying why, when the tokenizer cannot hold a chat.
  virtual const ChatFormat* chat() const = 0;
  virtual std::string chat_missing() const { return ""; }
  // The Hugging Face tokenizer.json the family's tokenizer was read from
  // (nullptr for a family with another tokenizer format): a draft model
  // whose file is byte-for-byte this one drafts token ids, not text.
  virtual const std::string* hf_tokenizer_file() const { return nullptr; }

  // Writes the heat histogram back to the store (atomically), if streaming;
  // while a setup holds the store, says so on stderr and writes nothing.
  void save_heat();
  // Starts a route trace into `path` (experts/route_trace.h).
  void open_route_trace(const std::string& path);
  // What the model is and where its experts come from, as data (the lines
  // that report it are bench/run_report.h's describe_model).
  ModelInfo info() const;
};

}  // namespace deltafin
