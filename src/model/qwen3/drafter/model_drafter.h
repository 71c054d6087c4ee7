// A separate small causal model as the drafter for raw completions
// (`--draft model:DIR`): a Qwen3 dense checkpoint with its own tokenizer.json.
// For a K3 target its vocabulary is not the target's, so drafting goes through text:
//   K3 history -> bytes -> Qwen3 tokens -> greedy Qwen3 tokens -> text -> K3 tokens.
// The target verifies the K3 tokens as any drafts; a tokenisation mismatch at
// the seam only costs acceptance, never output. For a target with the same
// tokenizer (a Qwen3-MoE model whose tokenizer.json is byte-for-byte the draft
// model's) drafting is token-level: the history's ids go in, the draft's
// greedy ids come out, with no round trip through text.
//
// Cost stays bounded at any context length: the draft model sees a window of
// the last kWindow K3 tokens whose start moves in steps of half a window, so
// its KV cache is rebuilt once per kWindow/2 tokens and otherwise only
// extended (the Qwen3 tokens of the window's text are re-encoded each step and
// the session is cut back to their common prefix with what it holds).
#pragma once

#include <memory>
#include <string>

#include "model/qwen3/qwen3_model.h"
#include "speculative/drafter.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/token_text.h"

namespace deltafin {

struct DraftModelAssets {
  Qwen3Config config;
  Qwen3Weights weights;
  std::unique_ptr<const HfTokenizer> tokenizer;
  const TokenText* target_tokenizer = nullptr;  // null: token-level drafting (same tokenizer)
  uint32_t target_vocab = 0;                    // token-level: drafts stop before an id the target has no row for
  ThreadPool* pool = nullptr;
  // DIR/config.json, DIR's safetensors and DIR/tokenizer.json.
  static std::shared_ptr<const DraftModelAssets> load(const std::string& dir, const TokenText& target, ThreadPool* pool);
  // Token-level: DIR/tokenizer.json must equal `target_tokenizer_json` (a file) byte for byte.
  static std::shared_ptr<const DraftModelAssets> load_same_vocabulary(const std::string& dir,
                                                                      const std::string& target_tokenizer_json,
                                                                      uint32_t target_vocab, ThreadPool* pool);
};

class ModelDrafter : public Drafter {
public:
  static constexpr size_t kWindow = 1024;  // target tokens of history the draft model reads
  explicit ModelDrafter(std::shared_ptr<const DraftModelAssets> assets);
  std::string name() const override { return "model"; }
  std::vector<uint32_t> propose(std::span<const uint32_t> history, int k) override;

private:
  std::shared_ptr<const DraftModelAssets> assets_;
  Qwen3Model model_;
  Qwen3Session session_;
  std::vector<uint32_t> held_;  // the Qwen3 tokens session_ holds
};

}  // namespace deltafin
