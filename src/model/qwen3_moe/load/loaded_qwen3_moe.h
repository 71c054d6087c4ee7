// Qwen3-MoE behind LoadedModel (load/loaded_model.h): its config, weights,
// Hugging Face tokenizer (and the tokenizer.json it came from, which a
// same-vocabulary draft model must match), chat format and model, loaded
// from a checkpoint (every expert in RAM) or from a store (experts
// streamed). The registry's loaders (model/loaders) pick this by family.
#pragma once

#include <memory>
#include <string>

#include "load/engine_options.h"
#include "load/loaded_model.h"
#include "model/qwen3/qwen3_chat.h"
#include "model/qwen3_moe/qwen3_moe_model.h"
#include "tokenizer/hf_tokenizer.h"

namespace deltafin {

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
  const std::string* hf_tokenizer_file() const override { return &tokenizer_json; }
};

std::unique_ptr<LoadedQwen3Moe> load_qwen3_moe_resident(const std::string& dir, int threads, const BackendChoice& backend = {});
std::unique_ptr<LoadedQwen3Moe> load_qwen3_moe_store(const std::string& store_dir, const EngineOptions& options);

}  // namespace deltafin
