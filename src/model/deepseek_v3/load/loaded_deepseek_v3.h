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
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

struct LoadedDeepseekV3 final : LoadedModel {
  DeepseekV3Config config;
  DeepseekV3Weights weights;
  std::unique_ptr<HfTokenizer> hf_tokenizer;  // DeepSeek's tokenizer.json
  std::unique_ptr<Tokenizer> tiktoken;        // or Kimi K2's tiktoken.model
  std::string tokenizer_json;
  std::unique_ptr<DeepseekV3Model> model;
  std::unique_ptr<ChatFormat> chat_format;
  std::string no_chat;
  CausalModel& causal() override { return *model; }
  const ChatFormat* chat() const override { return chat_format.get(); }
  std::string chat_missing() const override { return no_chat; }
  const std::string* hf_tokenizer_file() const override { return hf_tokenizer ? &tokenizer_json : nullptr; }
};

std::unique_ptr<LoadedDeepseekV3> load_deepseek_v3_resident(const std::string& dir, int threads);
std::unique_ptr<LoadedDeepseekV3> load_deepseek_v3_store(const std::string& store_dir, const EngineOptions& options);

}  // namespace deltafin
