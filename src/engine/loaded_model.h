// Everything needed to run a model of any family: the spine in RAM, an expert
// source, the tokenizer and the model behind the family interface
// (model/common/causal_model.h). Two ways in: a Hugging Face checkpoint
// directory with every expert read into RAM (resident, the reference), or a
// deltafin store whose experts stream from its drives. LoadedModel holds
// what every family has; LoadedK3 and LoadedQwen3Moe add their own config,
// weights and model. load_resident() picks the family from config.json
// through the registry (model/registry.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/engine_options.h"
#include "engine/memory_plan.h"
#include "engine/streaming_source.h"
#include "model/kimi_k3/checkpoint.h"
#include "model/common/causal_model.h"
#include "model/common/chat_format.h"
#include "model/kimi_k3/chat_format.h"
#include "model/kimi_k3/lookahead.h"
#include "model/kimi_k3/model.h"
#include "model/qwen3/qwen3_chat.h"
#include "model/qwen3_moe/qwen3_moe_model.h"
#include "model/registry.h"
#include "store/heat.h"
#include "store/store_manifest.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/token_text.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace deltafin {

// A derived class's members are destroyed before these, so a family's model
// and weights go before the expert source, and the source (and its reader
// threads) before the monitor and heat histogram it reports into. Keep that
// order when adding members.
struct LoadedModel {
  virtual ~LoadedModel() = default;
  const FamilyInfo* family = nullptr;
  std::string spine_format = "bf16";  // "bf16" or "int8-row" (not weight-exact, always announced)
  // Store runs only: manifest, heat, monitor, memory plan.
  std::string store_dir;
  std::unique_ptr<StoreManifest> manifest;
  std::unique_ptr<HeatHistogram> heat;
  std::unique_ptr<Monitor> monitor;
  MemoryPlan memory;

  std::unique_ptr<ExpertSource> experts;
  StreamingExpertSource* stream = nullptr;  // = experts when streaming
  std::unique_ptr<TokenText> text;          // the family's tokenizer as ordinary text
  std::vector<uint32_t> eos;                // where a raw generation stops, the usual token first (none: only at the budget)
  std::unique_ptr<ThreadPool> pool;
  double load_seconds = 0;
  // SHA-256 (hex) of what decides the numerics: config.json and the weights'
  // identity (a checkpoint's index and shard sizes, or a store's store.json,
  // which names the spine format and every expert's hash). Prompt states
  // kept on disk (engine/prompt_disk_cache.h) are only ever used by a model
  // with the same fingerprint.
  std::string fingerprint;

  virtual CausalModel& causal() = 0;
  const ModelSummary& summary() { return causal().summary(); }
  virtual const RouteLookahead* route_lookahead() const { return nullptr; }
  // The family's chat format (template and answer parser); nullptr, with
  // chat_missing() saying why, when the tokenizer cannot hold a chat.
  virtual const ChatFormat* chat() const = 0;
  virtual std::string chat_missing() const { return ""; }

  // Writes the heat histogram back to the store (atomically), if streaming.
  void save_heat();
  // One line for outputs that report configuration: family, spine format
  // (with the int8-row warning), experts source, cache, lookahead, I/O engine.
  std::string describe() const;
};

struct LoadedK3 final : LoadedModel {
  K3Config config;
  K3Weights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<RouteLookahead> lookahead;
  std::unique_ptr<K3Model> model;
  std::unique_ptr<K3ChatFormat> chat_format;
  CausalModel& causal() override { return *model; }
  const RouteLookahead* route_lookahead() const override { return lookahead.get(); }
  const ChatFormat* chat() const override { return chat_format.get(); }
};

struct LoadedQwen3Moe final : LoadedModel {
  Qwen3MoeConfig config;
  Qwen3MoeWeights weights;
  std::unique_ptr<HfTokenizer> tokenizer;
  std::string tokenizer_json;  // the file it was read from
  std::unique_ptr<Qwen3MoeModel> model;
  std::unique_ptr<Qwen3ChatFormat> chat_format;
  std::string no_chat;  // why chat_format is null
  CausalModel& causal() override { return *model; }
  const ChatFormat* chat() const override { return chat_format.get(); }
  std::string chat_missing() const override { return no_chat; }
};

std::unique_ptr<LoadedK3> load_k3_resident(const std::string& dir, int threads);
std::unique_ptr<LoadedK3> load_k3_store(const std::string& store_dir, const EngineOptions& options);
std::unique_ptr<LoadedQwen3Moe> load_qwen3_moe_resident(const std::string& dir, int threads);
std::unique_ptr<LoadedQwen3Moe> load_qwen3_moe_store(const std::string& store_dir, const EngineOptions& options);
// The family store.json names.
std::unique_ptr<LoadedModel> load_store(const std::string& store_dir, const EngineOptions& options);
// The family config.json names (a target family; draft-only ones are refused).
std::unique_ptr<LoadedModel> load_resident(const std::string& dir, int threads);

// The K3 model behind `m`, for what only K3 has yet (DSpark, prompt states
// on disk, the server): an error naming `what` and the family otherwise.
LoadedK3& require_k3(LoadedModel& m, const std::string& what);

}  // namespace deltafin
