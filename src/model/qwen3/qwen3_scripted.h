// A Qwen3 checkpoint whose greedy output is a chosen token sequence, for
// testing what the server makes of a model's output end to end (tool-call
// markup, malformed blocks) through the real loader, engine and parser.
// Random weights never write such markup; these weights do, deterministically.
//
// How: every layer adds nothing to the residual stream (o_proj and all
// down projections are zero), so the logits depend only on the current
// token's embedding, and the embeddings and lm_head form a bigram table.
// Token t's embedding is the one-hot vector of its state (the trigger is
// state 0, script[i] is state i+1, every other token the last dimension);
// lm_head row u has a 1 at every state whose successor is u. The final
// norm then scales the one-hot to sqrt(hidden), so the successor's logit is
// sqrt(hidden) and every other logit is 0: no ties, no rounding at stake.
// After the trigger comes script[0], after script[i] comes script[i+1],
// after the last script token and after any other token <|im_end|>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/safetensors_writer.h"

namespace deltafin {

struct ScriptedOutput {
  // Token spellings: an added token of the tokenizer (<tool_call>,
  // <|im_end|>, ...) or any other text, which becomes an extra added token
  // (non-special) after the usual ones. Each may appear once: a bigram table
  // has one successor per token.
  std::vector<std::string> tokens;
  // The token after which the script starts: by default the last token of
  // Qwen3's generation prompt, "<|im_start|>assistant\n".
  std::string trigger = "\n";
};

// The script's entries that are not added tokens already, in order.
std::vector<std::string> scripted_extra_tokens(const ScriptedOutput& script);

// The tensors a scripted checkpoint writes itself (the rest stay random).
class ScriptedWeights {
public:
  // bpe: the tokenizer's BPE tokens (byte strings by id); the added tokens
  // follow at ids bpe.size().., the extra ones after them; vocab: the config's.
  ScriptedWeights(const ScriptedOutput& script, const std::vector<std::string>& bpe, int64_t vocab, int64_t hidden);
  bool writes(const TensorSpec& t) const;
  void write(SafetensorsWriter& w, const TensorSpec& t) const;

private:
  int64_t vocab_, hidden_;
  std::vector<int64_t> state_of_;  // by token id
  std::vector<int64_t> next_of_;   // by state: the token that follows
};

}  // namespace deltafin
