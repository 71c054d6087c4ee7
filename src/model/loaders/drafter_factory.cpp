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

DraftSpec parse_draft_spec(const std::string& text) {
  DraftSpec s;
  if (text == "auto") s.kind = DraftSpec::Kind::Auto;
  else if (text == "none") s.kind = DraftSpec::Kind::None;
  else if (text == "ngram") s.kind = DraftSpec::Kind::Ngram;
  else if (starts_with(text, "dspark:")) s.kind = DraftSpec::Kind::Head, s.head_dir = after_colon(text);
  else if (starts_with(text, "model:")) s.kind = DraftSpec::Kind::Model, s.model_dir = after_colon(text);
  else if (starts_with(text, "replay:")) s.kind = DraftSpec::Kind::Replay, s.replay_file = after_colon(text);
  else fail("--draft ", text, ": unknown drafter (none, ngram, dspark:DIR, model:DIR, replay:FILE, auto)");
  return s;
}

std::string draft_spec_text(const DraftSpec& s) {
  switch (s.kind) {
    case DraftSpec::Kind::Auto: return "auto";
    case DraftSpec::Kind::None: return "none";
    case DraftSpec::Kind::Ngram: return "ngram";
    case DraftSpec::Kind::Replay: return "replay:" + s.replay_file;
    case DraftSpec::Kind::Head: return "dspark:" + s.head_dir;
    case DraftSpec::Kind::Model: return "model:" + s.model_dir;
  }
  return "?";
}

DrafterFactory::DrafterFactory(const DraftSpec& spec, LoadedModel& target) : spec_(spec) {
  using Kind = DraftSpec::Kind;
  if (spec.kind == Kind::Replay) {
    const std::string& path = spec.replay_file;
    if (!std::filesystem::is_regular_file(path))
      fail("--draft ", draft_spec_text(spec), ": ", path, " is not a file (give a run's --tokens-out)");
    replay_ = read_token_file(path, target.summary().vocab);
  }
  // Every directory given is read (and so checked), whatever the kind uses.
  if (!spec.head_dir.empty()) dspark_ = DSparkAssets::load(spec.head_dir, target);
  if (!spec.model_dir.empty()) {
    // A target with a Hugging Face tokenizer drafts token ids and needs the
    // draft model's tokenizer.json to be its own; any other drafts through text.
    if (const std::string* tokenizer_json = target.hf_tokenizer_file())
      model_ = DraftModelAssets::load_same_vocabulary(spec.model_dir, *tokenizer_json,
                                                      static_cast<uint32_t>(target.summary().vocab), target.pool.get());
    else
      model_ = DraftModelAssets::load(spec.model_dir, *target.text, target.pool.get());
  }
}

DrafterFactory::~DrafterFactory() = default;

std::unique_ptr<Drafter> DrafterFactory::make(const std::vector<uint32_t>& prompt, bool chat) const {
  switch (spec_.kind) {
    case DraftSpec::Kind::None: return nullptr;
    case DraftSpec::Kind::Ngram: return std::make_unique<NgramDrafter>();
    case DraftSpec::Kind::Replay: {
      std::vector<uint32_t> expected = prompt;
      expected.insert(expected.end(), replay_.begin(), replay_.end());
      return std::make_unique<ReplayDrafter>(std::move(expected));
    }
    case DraftSpec::Kind::Head: return std::make_unique<DSparkDrafter>(dspark_);
    case DraftSpec::Kind::Model: return std::make_unique<ModelDrafter>(model_);
    case DraftSpec::Kind::Auto: break;
  }
  if (!chat && model_) return std::make_unique<ModelDrafter>(model_);
  if (dspark_) return std::make_unique<DSparkDrafter>(dspark_);
  return std::make_unique<NgramDrafter>();
}

std::string DrafterFactory::describe() const {
  if (spec_.kind != DraftSpec::Kind::Auto) return draft_spec_text(spec_);
  std::string chat = dspark_ ? "dspark" : "ngram";
  std::string raw = model_ ? "model" : chat;
  return "auto (chats: " + chat + ", completions: " + raw + ")";
}

}  // namespace deltafin
