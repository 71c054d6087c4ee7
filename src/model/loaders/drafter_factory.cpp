#include "model/loaders/drafter_factory.h"

#include <cctype>
#include <filesystem>

#include "model/k3_dspark/drafter/dspark_drafter.h"
#include "model/qwen3/drafter/model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "speculative/replay_drafter.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

// Comma- or whitespace-separated ids, as --tokens-out writes them.
std::vector<uint32_t> read_token_file(const std::string& path, int64_t vocab) {
  const std::string text = read_text_file(path);
  std::vector<uint32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (ch == ',' || std::isspace(ch)) {
      ++i;
      continue;
    }
    if (!std::isdigit(ch)) fail(path, ": byte ", i, " ('", text[i], "') is not part of a token id list");
    uint64_t v = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      v = v * 10 + static_cast<uint64_t>(text[i] - '0');
      if (v >= static_cast<uint64_t>(vocab)) fail(path, ": token id at byte ", i, " is outside the vocabulary of ", vocab);
      ++i;
    }
    ids.push_back(static_cast<uint32_t>(v));
  }
  if (ids.empty()) fail(path, ": no token ids");
  return ids;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string after_colon(const std::string& spec) {
  const std::string rest = spec.substr(spec.find(':') + 1);
  if (rest.empty()) fail("--draft ", spec, ": a path is needed after the colon");
  return rest;
}

}  // namespace

DrafterFactory::DrafterFactory(const std::string& spec, LoadedModel& target, const std::string& dspark_dir,
                               const std::string& model_dir)
    : spec_(spec) {
  std::string dspark = dspark_dir, model = model_dir;
  if (starts_with(spec, "dspark:")) dspark = after_colon(spec);
  if (starts_with(spec, "model:")) model = after_colon(spec);
  if (starts_with(spec, "replay:")) {
    const std::string path = after_colon(spec);
    if (!std::filesystem::is_regular_file(path))
      fail("--draft ", spec, ": ", path, " is not a file (give a run's --tokens-out)");
    replay_ = read_token_file(path, target.summary().vocab);
  } else if (spec != "none" && spec != "ngram" && spec != "auto" && !starts_with(spec, "dspark:") &&
             !starts_with(spec, "model:")) {
    fail("--draft ", spec, ": unknown drafter (none, ngram, dspark:DIR, model:DIR, replay:FILE, auto)");
  }
  if (!dspark.empty()) dspark_ = DSparkAssets::load(dspark, target);
  if (!model.empty()) {
    // A target with a Hugging Face tokenizer drafts token ids and needs the
    // draft model's tokenizer.json to be its own; any other drafts through text.
    if (const std::string* tokenizer_json = target.hf_tokenizer_file())
      model_ = DraftModelAssets::load_same_vocabulary(model, *tokenizer_json,
                                                      static_cast<uint32_t>(target.summary().vocab), target.pool.get());
    else
      model_ = DraftModelAssets::load(model, *target.text, target.pool.get());
  }
}

DrafterFactory::~DrafterFactory() = default;

std::unique_ptr<Drafter> DrafterFactory::make(const std::vector<uint32_t>& prompt, bool chat) const {
  if (spec_ == "none") return nullptr;
  if (spec_ == "ngram") return std::make_unique<NgramDrafter>();
  if (!replay_.empty()) {
    std::vector<uint32_t> expected = prompt;
    expected.insert(expected.end(), replay_.begin(), replay_.end());
    return std::make_unique<ReplayDrafter>(std::move(expected));
  }
  if (starts_with(spec_, "dspark:")) return std::make_unique<DSparkDrafter>(dspark_);
  if (starts_with(spec_, "model:")) return std::make_unique<ModelDrafter>(model_);
  // auto
  if (!chat && model_) return std::make_unique<ModelDrafter>(model_);
  if (dspark_) return std::make_unique<DSparkDrafter>(dspark_);
  return std::make_unique<NgramDrafter>();
}

std::string DrafterFactory::describe() const {
  if (spec_ != "auto") return spec_;
  std::string chat = dspark_ ? "dspark" : "ngram";
  std::string raw = model_ ? "model" : chat;
  return "auto (chats: " + chat + ", completions: " + raw + ")";
}

}  // namespace deltafin
