// `--draft` specs (speculative/draft_spec.h) to drafters. What a spec needs from disk (DSpark weights, a
// draft model) is loaded once by the factory; make() gives each request its
// own drafter (its own n-gram index, DSpark context, draft-model cache).
//   none         plain decoding
//   ngram        prompt lookup (speculative/ngram_drafter.h)
//   dspark:DIR   K3's DSpark drafter (model/k3_dspark/drafter/dspark_drafter.h)
//   model:DIR    a small Qwen3 model with its own tokenizer (model/qwen3/drafter/model_drafter.h)
//   replay:FILE  the oracle of benchmarks: replays FILE's token ids (a
//                previous run's --tokens-out) after the prompt
//   auto         the best available per request: for a chat, DSpark when
//                the spec's head_dir is given; for a raw completion the draft
//                model when its model_dir is given, else DSpark; otherwise n-gram
// DSpark is the K3 family's drafter head (DraftSpec::Kind::Head).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "speculative/draft_spec.h"
#include "load/loaded_model.h"
#include "speculative/drafter.h"

namespace deltafin {

struct DSparkAssets;
struct DraftModelAssets;

// A `--draft` string as a spec; an error names it and what is wrong.
DraftSpec parse_draft_spec(const std::string& text);
// The spec as `--draft` would give it (auto's directories are not shown).
std::string draft_spec_text(const DraftSpec& spec);

class DrafterFactory {
public:
  // Errors name the spec (or directory) and what is wrong with it.
  DrafterFactory(const DraftSpec& spec, LoadedModel& target);
  ~DrafterFactory();
  // nullptr for plain decoding.
  std::unique_ptr<Drafter> make(const std::vector<uint32_t>& prompt, bool chat) const;
  // "auto (dspark for chats, model for completions, else ngram)" style, for logs.
  std::string describe() const;

private:
  DraftSpec spec_;
  std::vector<uint32_t> replay_;  // replay:FILE's ids, read once (empty otherwise)
  std::shared_ptr<const DSparkAssets> dspark_;
  std::shared_ptr<const DraftModelAssets> model_;
};

}  // namespace deltafin
