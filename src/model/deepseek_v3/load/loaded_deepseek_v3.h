// The DeepSeek-V3 family behind LoadedModel (load/loaded_model.h): config,
// spine, tokenizer (DeepSeek's tokenizer.json or Kimi K2's tiktoken.model),
// chat format and model, from a checkpoint (every expert in RAM) or a store
// (experts streamed). model/loaders picks this by family.
#pragma once

#include <memory>
#include <string>

#include "load/engine_options.h"
#include "load/loaded_model.h"
#include "model/deepseek_v3/model.h"
#include "model/deepseek_v3/chat_format.h"

namespace deltafin {

struct LoadedDeepseekV3 final : LoadedModel {
  DeepseekV3Config config;
  DeepseekV3Weights weights;
  // DeepSeek's tokenizer.json or Kimi K2's tiktoken.model, with the chat
  // format of the flavour its files show (its text moves to LoadedModel::text).
  std::unique_ptr<DeepSeekV3Tokenizer> tokenizer;
  std::unique_ptr<DeepseekV3Model> model;
  CausalModel& causal() override { return *model; }
  const ChatFormat* chat() const override { return tokenizer->chat.get(); }
  std::string chat_missing() const override { return tokenizer->no_chat; }
  const std::string* hf_tokenizer_file() const override { return tokenizer->hf ? &tokenizer->tokenizer_json : nullptr; }
};

std::unique_ptr<LoadedDeepseekV3> load_deepseek_v3_resident(const std::string& dir, int threads, const BackendChoice& backend = {});
std::unique_ptr<LoadedDeepseekV3> load_deepseek_v3_store(const std::string& store_dir, const EngineOptions& options);

}  // namespace deltafin
