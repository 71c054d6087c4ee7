// Kimi K3 behind LoadedModel (load/loaded_model.h): its config, weights,
// tiktoken tokenizer, chat format, route lookahead and model, loaded from a
// Hugging Face checkpoint (every expert in RAM) or from a store (experts
// streamed). The registry's loaders (model/loaders) pick this by family.
#pragma once

#include <memory>
#include <string>

#include "load/engine_options.h"
#include "load/loaded_model.h"
#include "model/kimi_k3/chat_format.h"
#include "model/kimi_k3/config.h"
#include "model/kimi_k3/lookahead.h"
#include "model/kimi_k3/model.h"
#include "model/kimi_k3/weights.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

struct LoadedK3 final : LoadedModel {
  K3Config config;
  K3Weights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<RouteLookahead> lookahead;
  std::unique_ptr<K3Model> model;
  std::unique_ptr<K3ChatFormat> chat_format;
  CausalModel& causal() override { return *model; }
  const RouteLookaheadReport* route_lookahead() const override { return lookahead.get(); }
  const ChatFormat* chat() const override { return chat_format.get(); }
};

std::unique_ptr<LoadedK3> load_k3_resident(const std::string& dir, int threads, const BackendChoice& backend = {});
std::unique_ptr<LoadedK3> load_k3_store(const std::string& store_dir, const EngineOptions& options);

// The K3 model behind `m`, for what only K3 has (DSpark): an error naming
// `what` and m's family otherwise.
LoadedK3& require_k3(LoadedModel& m, const std::string& what);

}  // namespace deltafin
