#include "model/qwen3/qwen3_scripted.h"

#include <algorithm>

#include "model/qwen3/qwen3_generator.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

int64_t added_index(const std::string& spelling) {
  for (int i = 0; i < kQwen3AddedTokens; ++i)
    if (spelling == qwen3_added_token(i)) return i;
  return -1;
}

}  // namespace

std::vector<std::string> scripted_extra_tokens(const ScriptedOutput& script) {
  std::vector<std::string> extra;
  for (const std::string& t : script.tokens)
    if (added_index(t) < 0 && std::find(extra.begin(), extra.end(), t) == extra.end()) extra.push_back(t);
  return extra;
}

ScriptedWeights::ScriptedWeights(const ScriptedOutput& script, const std::vector<std::string>& bpe, int64_t vocab,
                                 int64_t hidden)
    : vocab_(vocab), hidden_(hidden) {
  const int64_t n_bpe = static_cast<int64_t>(bpe.size());
  const std::vector<std::string> extra = scripted_extra_tokens(script);
  if (n_bpe + kQwen3AddedTokens + static_cast<int64_t>(extra.size()) != vocab)
    fail("scripted checkpoint: ", n_bpe, " BPE + ", kQwen3AddedTokens, " added + ", extra.size(),
         " script tokens != vocab ", vocab);
  auto id_of = [&](const std::string& spelling) -> int64_t {
    if (const int64_t a = added_index(spelling); a >= 0) return n_bpe + a;
    const auto e = std::find(extra.begin(), extra.end(), spelling);
    if (e != extra.end()) return n_bpe + kQwen3AddedTokens + (e - extra.begin());
    const auto b = std::find(bpe.begin(), bpe.end(), spelling);
    if (b != bpe.end()) return b - bpe.begin();
    fail("scripted checkpoint: the trigger \"", spelling, "\" is not one token of the tokenizer");
  };
  const int64_t states = static_cast<int64_t>(script.tokens.size()) + 2;  // trigger, script, the rest
  if (script.tokens.empty()) fail("scripted checkpoint: the script is empty");
  if (states > hidden) fail("scripted checkpoint: ", script.tokens.size(), " script tokens need hidden >= ", states);
  const int64_t rest = hidden - 1;
  state_of_.assign(static_cast<size_t>(vocab), rest);
  const int64_t im_end = id_of("<|im_end|>");
  next_of_.assign(static_cast<size_t>(hidden), im_end);
  std::vector<int64_t> chain{id_of(script.trigger)};
  for (const std::string& t : script.tokens) chain.push_back(id_of(t));
  for (size_t k = 0; k < chain.size(); ++k) {
    if (state_of_[chain[k]] != rest)
      fail("scripted checkpoint: token \"", k == 0 ? script.trigger : script.tokens[k - 1],
           "\" appears twice in the trigger and script (a bigram table has one successor per token)");
    state_of_[chain[k]] = static_cast<int64_t>(k);
    if (k + 1 < chain.size()) next_of_[k] = chain[k + 1];
  }
}

bool ScriptedWeights::writes(const TensorSpec& t) const {
  return t.name == "model.embed_tokens.weight" || t.name == "lm_head.weight" || t.name == "model.norm.weight" ||
         t.name.ends_with("o_proj.weight") || t.name.ends_with("down_proj.weight");
}

void ScriptedWeights::write(SafetensorsWriter& w, const TensorSpec& t) const {
  const uint16_t one = f32_to_bf16(1.0f), zero = f32_to_bf16(0.0f);
  std::vector<uint16_t> row;
  if (t.name == "model.norm.weight") {
    row.assign(static_cast<size_t>(hidden_), one);
    w.append(row.data(), row.size() * 2);
    return;
  }
  const uint64_t n = t.bytes() / 2;
  if (t.name != "model.embed_tokens.weight" && t.name != "lm_head.weight") {
    row.assign(static_cast<size_t>(std::min<uint64_t>(n, 1u << 20)), zero);
    for (uint64_t done = 0; done < n; done += row.size())
      w.append(row.data(), static_cast<size_t>(std::min<uint64_t>(row.size(), n - done)) * 2);
    return;
  }
  // [vocab, hidden]: one row per token.
  for (int64_t id = 0; id < vocab_; ++id) {
    row.assign(static_cast<size_t>(hidden_), zero);
    if (t.name == "model.embed_tokens.weight") {
      row[static_cast<size_t>(state_of_[id])] = one;
    } else {
      for (int64_t s = 0; s < hidden_; ++s)
        if (next_of_[s] == id) row[static_cast<size_t>(s)] = one;
    }
    w.append(row.data(), row.size() * 2);
  }
}

}  // namespace deltafin
