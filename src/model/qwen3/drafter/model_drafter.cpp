#include "model/qwen3/drafter/model_drafter.h"

#include <algorithm>
#include <filesystem>

#include "model/common/greedy.h"
#include "tokenizer/utf8.h"
#include "util/file.h"
#include "util/error.h"

namespace deltafin {

namespace {

// Bytes as text both tokenizers accept: a character the end cuts short is
// dropped (more bytes of it may follow), any other invalid byte run becomes
// U+FFFD, which is what a model reading this text would see anyway.
std::string as_text(std::string_view bytes) {
  return utf8_replace_invalid(bytes.substr(0, bytes.size() - utf8_incomplete_tail(bytes)));
}

std::string decode_bytes(const TokenText& text, const std::vector<uint32_t>& ids) {
  std::string out;
  for (uint32_t id : ids) out += text.token_bytes(id);
  return out;
}

}  // namespace

std::shared_ptr<const DraftModelAssets> DraftModelAssets::load(const std::string& dir, const TokenText& target,
                                                               ThreadPool* pool) {
  auto a = std::make_shared<DraftModelAssets>();
  const std::filesystem::path d(dir);
  a->config = read_qwen3_config((d / "config.json").string());
  a->weights = load_qwen3_weights(a->config, dir);
  a->tokenizer = std::make_unique<const HfTokenizer>(HfTokenizer::load((d / "tokenizer.json").string()));
  if (a->tokenizer->vocab_size() > static_cast<size_t>(a->config.vocab_size))
    fail(dir, ": tokenizer.json has ", a->tokenizer->vocab_size(), " ids but config.json's vocab_size is ",
         a->config.vocab_size);
  a->target_tokenizer = &target;
  a->pool = pool;
  return a;
}

std::shared_ptr<const DraftModelAssets> DraftModelAssets::load_same_vocabulary(const std::string& dir,
                                                                               const std::string& target_tokenizer_json,
                                                                               uint32_t target_vocab, ThreadPool* pool) {
  const std::string mine = (std::filesystem::path(dir) / "tokenizer.json").string();
  if (read_text_file(mine) != read_text_file(target_tokenizer_json))
    fail("--draft model:", dir, ": its tokenizer.json differs from the target's (", target_tokenizer_json,
         "); token-level drafting needs the same tokenizer");
  auto a = std::make_shared<DraftModelAssets>();
  a->config = read_qwen3_config((std::filesystem::path(dir) / "config.json").string());
  a->weights = load_qwen3_weights(a->config, dir);
  a->tokenizer = std::make_unique<const HfTokenizer>(HfTokenizer::load(mine));
  a->target_vocab = target_vocab;
  a->pool = pool;
  return a;
}

ModelDrafter::ModelDrafter(std::shared_ptr<const DraftModelAssets> assets)
    : assets_(std::move(assets)),
      model_(assets_->config, assets_->weights, assets_->pool),
      session_(assets_->config, std::min<int64_t>(assets_->config.max_position_embeddings, 8 * kWindow)) {}

std::vector<uint32_t> ModelDrafter::propose(std::span<const uint32_t> history, int k) {
  if (k <= 0 || history.empty()) return {};
  // The window: its start moves in steps of kWindow / 2 so the cache is mostly reused.
  const size_t n = history.size(), half = kWindow / 2;
  const size_t start = n > kWindow ? (n - kWindow) / half * half : 0;
  const std::vector<uint32_t> window(history.begin() + static_cast<std::ptrdiff_t>(start), history.end());
  const bool token_level = assets_->target_tokenizer == nullptr;
  const size_t V = static_cast<size_t>(assets_->config.vocab_size);
  std::vector<uint32_t> q;
  if (token_level) {
    for (uint32_t id : window)
      if (id >= V) return {};  // an id past the draft model's embedding (a padded target vocabulary)
    q = window;
  } else {
    const std::string text = as_text(decode_bytes(*assets_->target_tokenizer, window));
    if (text.empty()) return {};
    q = assets_->tokenizer->encode(text, false);
  }
  const int64_t room = session_.capacity() - static_cast<int64_t>(q.size()) - (k + 1);
  if (q.empty() || room < 0) return {};

  // Keep what the session already holds of this text; run the rest.
  size_t common = 0;
  while (common < q.size() && common < held_.size() && q[common] == held_[common]) ++common;
  if (common == q.size()) --common;  // the last token must run again for its logits
  session_.truncate(static_cast<int64_t>(common));
  held_.assign(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(common));
  std::vector<float> logits = model_.forward(session_, std::span<const uint32_t>(q).subspan(common), false);
  held_ = q;

  // Greedy draft tokens (k of them token-level; one more through text, whose
  // last target token may be cut short), then back to the window: drafts are not kept.
  std::vector<uint32_t> drafted;
  const int extra = token_level ? 0 : 1;
  for (int i = 0; i < k + extra; ++i) {
    const uint32_t t = argmax_first(logits.data(), V);
    drafted.push_back(t);
    if (i + 1 == k + extra) break;
    const uint32_t one[1] = {t};
    logits = model_.forward(session_, one, false);
  }
  session_.truncate(static_cast<int64_t>(q.size()));
  if (token_level) {
    // Padding rows of the two embeddings may differ: a draft id the target
    // has no row for ends the draft there.
    const auto past = std::find_if(drafted.begin(), drafted.end(), [&](uint32_t t) { return t >= assets_->target_vocab; });
    drafted.erase(past, drafted.end());
    return drafted;
  }
  std::string draft_text;
  try {
    draft_text = assets_->tokenizer->decode(drafted);
  } catch (const Error&) {
    return {};  // a drafted id outside the tokenizer (padding rows of the embedding)
  }
  std::vector<uint32_t> out = assets_->target_tokenizer->encode_ordinary(as_text(draft_text));
  // The last target token may be cut short by where the draft stopped: drop it.
  if (out.size() > 1) out.pop_back();
  if (out.size() > static_cast<size_t>(k)) out.resize(static_cast<size_t>(k));
  return out;
}

}  // namespace deltafin
