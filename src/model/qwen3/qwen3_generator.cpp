#include "model/qwen3/qwen3_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "format/checkpoint.h"
#include "format/checkpoint_dir.h"
#include "format/safetensors_writer.h"
#include "model/common/routing_profile.h"
#include "model/qwen3/qwen3_weights.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/pretokenizer.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"
#include "util/rng.h"

namespace deltafin {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kQwen3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// The text the generated tokenizer is trained on: ordinary English prose,
// some code and numbers, so the merges look like a real tokenizer's. (The K3
// generator's text lives in the kimi_k3 library, which this one does not link.)
constexpr std::string_view kTrainingText =
    "A draft model proposes the next few tokens of a completion and the target model checks them all in one "
    "pass. When the draft is right, several tokens are accepted for the price of one step of the large model; "
    "when it is wrong, the target keeps its own token and the draft rolls its cache back to the last accepted "
    "position. The small model must therefore be cheap, it must agree with the large one as often as possible, "
    "and it must be able to forget the positions that were rejected.\n\n"
    "The quick brown fox jumps over the lazy dog. The dog, who was not lazy at all, simply did not want to run "
    "that morning. It was raining, the wind was cold, and the fields were full of water. Later in the day the sun "
    "came out, the children went outside to play, and the fox returned to the edge of the forest to watch them.\n\n"
    "In the beginning there was only the question of how to store the weights. Each matrix is kept in bfloat16, "
    "the activations in single precision, and every sum is computed in the same order whatever the batch size, "
    "so that running the tokens one at a time or all together gives exactly the same numbers.\n\n"
    "def attention(query, keys, values, scale):\n"
    "    scores = [scale * dot(query, key) for key in keys]\n"
    "    weights = softmax(scores)\n"
    "    return sum(weight * value for weight, value in zip(weights, values))\n\n"
    "for (int i = 0; i < n; ++i) {\n    total += values[i] * weights[i];\n}\n\n"
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 12 16 32 64 128 256 512 1024 2048 4096, and the year 2025.\n"
    "Prices went from $12.50 to $14.75 in three weeks; the report said the increase was 18 percent.\n\n"
    "She said that she would come back tomorrow, but she didn't. They're still waiting, and we've heard "
    "nothing since. I'll write to her again; you'd think she would answer. It's been a long time, and the "
    "letters we sent are still on the table where she left them, next to the lamp and the old clock.\n\n"
    "The river runs through the town and under seven bridges before it reaches the sea. In summer the water is "
    "low and clear, and people walk along the stones in the middle of it; in winter it rises, turns brown, and "
    "carries branches, leaves and sometimes whole trees down from the mountains.\n";

// In the released order (<|endoftext|> 151643 ... </think> 151668, the ones
// between left out); the chat format needs all but the first
// (model/qwen3/qwen3_chat.h).
constexpr int kAddedTokens = kQwen3AddedTokens;
const char* const kSpecialTokens[kAddedTokens] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                                  "<tool_call>",   "</tool_call>", "<tool_response>",
                                                  "</tool_response>", "<think>", "</think>"};
bool is_special(int i) { return i < 3; }

// The added tokens' spellings, then `extra` (non-special).
std::vector<std::pair<std::string, bool>> added_tokens(const std::vector<std::string>& extra) {
  std::vector<std::pair<std::string, bool>> out;
  for (int i = 0; i < kAddedTokens; ++i) out.emplace_back(kSpecialTokens[i], is_special(i));
  for (const std::string& e : extra) out.emplace_back(e, false);
  return out;
}

// GPT-2's byte -> code point table of byte-level BPE: printable bytes map to
// themselves, the other 68 to 256, 257, ... in byte order, so every token is
// a printable string and a space never appears inside one (merges are
// written "left right").
std::vector<std::string> byte_to_unicode() {
  std::vector<std::string> out(256);
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {  // every code point here is below 0x800
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    out[b] = utf8(printable ? b : next++);
  }
  return out;
}

std::string to_token_string(const std::string& bytes, const std::vector<std::string>& table) {
  std::string s;
  for (unsigned char c : bytes) s += table[c];
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How a tensor's values are drawn, from its name: this is where "activations
// stay of order 1" is decided.
double init_scale(const TensorSpec& t, bool tied, bool* ones) {
  *ones = false;
  if (ends_with(t.name, "norm.weight")) {  // norm weights: 1 + small noise, so they are not all equal
    *ones = true;
    return 0.1;
  }
  const double hidden = static_cast<double>(t.shape[1]);
  // Untied: embeddings of RMS 1 (they are normalised before use anyway).
  // Tied: the same matrix also makes the logits (dot products over hidden),
  // so hidden^-1/4 balances the embedding scale against the logit scale.
  if (t.name == "model.embed_tokens.weight") return tied ? std::pow(hidden, -0.25) : 1.0;
  // Projections: std 1/sqrt(fan-in) keeps the output scale equal to the input's.
  return 1.0 / std::sqrt(hidden);
}

// `shaper` (a routing profile) scales rows after the values are drawn, so
// the random stream, and every tensor it does not name, stay as without it.
void write_tensor(SafetensorsWriter& w, const TensorSpec& t, uint64_t seed, bool tied, const RoutingShaper* shaper) {
  Rng rng(seed ^ fnv1a64(t.name));
  bool ones = false;
  const double scale = init_scale(t, tied, &ones);
  const uint64_t n = t.bytes() / 2;
  const std::vector<double> factors =
      shaper ? shaper->row_factors(t.name, t.shape.empty() ? 1 : t.shape[0]) : std::vector<double>{};
  const uint64_t row_elems = t.shape.empty() ? 1 : n / t.shape[0];
  std::vector<uint16_t> buf(static_cast<size_t>(std::min<uint64_t>(n, 1u << 20)));
  for (uint64_t done = 0; done < n;) {
    const size_t m = static_cast<size_t>(std::min<uint64_t>(buf.size(), n - done));
    for (size_t i = 0; i < m; ++i) {
      double v = (ones ? 1.0 : 0.0) + scale * rng.normal();
      if (!factors.empty()) {
        const double f = factors[static_cast<size_t>((done + i) / row_elems)];
        v = f == 0 ? 0.0 : f * v;  // a zeroed row is +0, not -0
      }
      buf[i] = f32_to_bf16(static_cast<float>(v));
    }
    w.append(buf.data(), m * 2);  // little-endian host, as safetensors
    done += m;
  }
}

// Consecutive runs of tensors, n of them, balanced by bytes.
std::vector<std::vector<TensorSpec>> plan_shards(const std::vector<TensorSpec>& tensors, int n) {
  uint64_t total = 0;
  for (const TensorSpec& t : tensors) total += t.bytes();
  std::vector<std::vector<TensorSpec>> shards(n);
  uint64_t before = 0;
  size_t next = 0;
  for (int s = 0; s < n; ++s) {
    // Shard s takes tensors until the running total reaches (s+1)/n of the
    // bytes, keeping at least one tensor for each shard still to come.
    const uint64_t target = total * static_cast<uint64_t>(s + 1) / static_cast<uint64_t>(n);
    const size_t must_leave = static_cast<size_t>(n - s - 1);
    while (next < tensors.size() - must_leave &&
           (shards[s].empty() || before + tensors[next].bytes() <= target || s == n - 1)) {
      before += tensors[next].bytes();
      shards[s].push_back(tensors[next++]);
    }
  }
  return shards;
}

json tokenizer_config_json(uint32_t first_special, int64_t max_positions, const std::vector<std::string>& extra) {
  json added = json::object();
  const auto tokens = added_tokens(extra);
  for (size_t i = 0; i < tokens.size(); ++i)
    added[std::to_string(first_special + static_cast<uint32_t>(i))] = {
        {"content", tokens[i].first}, {"lstrip", false},      {"normalized", false},
        {"rstrip", false},            {"single_word", false}, {"special", tokens[i].second}};
  return json{{"add_bos_token", false},
              {"add_prefix_space", false},
              {"added_tokens_decoder", added},
              {"additional_special_tokens", {kSpecialTokens[1], kSpecialTokens[2]}},
              {"bos_token", nullptr},
              {"clean_up_tokenization_spaces", false},
              {"eos_token", kSpecialTokens[0]},
              {"errors", "replace"},
              {"model_max_length", max_positions},
              {"pad_token", kSpecialTokens[0]},
              {"split_special_tokens", false},
              {"tokenizer_class", "Qwen2Tokenizer"},
              {"unk_token", nullptr}};
}

}  // namespace

const char* qwen3_added_token(int i) { return kSpecialTokens[i]; }

json qwen3_tokenizer_json(const std::vector<std::string>& tokens, const std::vector<std::string>& extra_added) {
  if (tokens.size() < 256) fail("qwen3 tokenizer: ", tokens.size(), " tokens, expected the 256 bytes first");
  const std::vector<std::string> table = byte_to_unicode();
  std::unordered_map<std::string, uint32_t> id_of;
  json vocab = json::object();
  for (uint32_t i = 0; i < tokens.size(); ++i) {
    if (!id_of.emplace(tokens[i], i).second) fail("qwen3 tokenizer: token ", i, " repeats an earlier token");
    vocab[to_token_string(tokens[i], table)] = i;
  }
  // Merges ordered by the id of the token they make, then by the ids of the
  // two parts; every split of a token into two tokens is listed. With that
  // order, merging by list priority picks the pair whose result has the
  // lowest id, which is exactly rank-based (tiktoken-style) BPE on the ranks
  // train_bpe produced.
  json merges = json::array();
  for (uint32_t id = 256; id < tokens.size(); ++id) {
    const std::string& s = tokens[id];
    std::vector<std::pair<uint32_t, uint32_t>> splits;
    for (size_t p = 1; p < s.size(); ++p) {
      auto l = id_of.find(s.substr(0, p)), r = id_of.find(s.substr(p));
      if (l != id_of.end() && r != id_of.end()) splits.emplace_back(l->second, r->second);
    }
    if (splits.empty()) fail("qwen3 tokenizer: token ", id, " is not the concatenation of two tokens");
    std::sort(splits.begin(), splits.end());
    for (const auto& [l, r] : splits)
      merges.push_back(to_token_string(tokens[l], table) + " " + to_token_string(tokens[r], table));
  }
  json added = json::array();
  const auto specials = added_tokens(extra_added);
  for (size_t i = 0; i < specials.size(); ++i)
    added.push_back({{"id", tokens.size() + i},
                     {"content", specials[i].first},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", specials[i].second}});
  const json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", kQwen3Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
          byte_level}}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
}

Qwen3GenerateResult generate_qwen3_checkpoint(const Qwen3GenerateOptions& o) {
  if (o.vocab < 256 + 1 + kAddedTokens)
    fail("make-model: --vocab ", o.vocab, " is too small: 256 byte tokens + at least one merge + ", kAddedTokens,
         " added tokens");
  Qwen3Config want;
  want.hidden_size = o.hidden;
  want.intermediate_size = o.intermediate;
  want.num_hidden_layers = o.layers;
  want.num_attention_heads = o.heads;
  want.num_key_value_heads = o.kv_heads;
  want.head_dim = o.head_dim;
  want.vocab_size = o.vocab;
  want.max_position_embeddings = o.max_position_embeddings;
  want.rms_norm_eps = o.rms_norm_eps;
  want.rope_theta = o.rope_theta;
  want.tie_word_embeddings = o.tie_word_embeddings;
  const int64_t n_bpe = o.vocab - kAddedTokens;
  want.bos_token_id = n_bpe;  // <|endoftext|>, as in Qwen3 base checkpoints
  want.eos_token_ids = {n_bpe};
  const json config_json = qwen3_config_json(want);
  // Parse our own config through the real loader first: the generator never
  // writes a checkpoint the runtime would refuse.
  const Qwen3Config config = parse_qwen3_config(config_json, "generated config.json");
  const std::vector<TensorSpec> tensors = qwen3_tensor_specs(config);
  Qwen3CheckpointFiles files{o.out_dir, o.seed, o.force, o.shards, o.vocab, o.max_position_embeddings,
                             config.tie_word_embeddings};
  Qwen3GenerateResult result;
  result.payload_bytes = write_qwen3_checkpoint_files(files, tensors, config_json);
  result.config = config;
  result.shards = o.shards;
  result.tensors = tensors.size();
  return result;
}

uint64_t write_qwen3_checkpoint_files(const Qwen3CheckpointFiles& o, const std::vector<TensorSpec>& tensors,
                                      const json& config_json) {
  if (o.out_dir.empty()) fail("make-model: no output directory");
  if (o.vocab < 256 + 1 + kAddedTokens)
    fail("make-model: --vocab ", o.vocab, " is too small: 256 byte tokens + at least one merge + ", kAddedTokens,
         " added tokens");
  if (o.shards < 1 || static_cast<size_t>(o.shards) > tensors.size())
    fail("make-model: --shards ", o.shards, " must be between 1 and the number of tensors (", tensors.size(), ")");
  const std::vector<std::string> extra = o.script ? scripted_extra_tokens(*o.script) : std::vector<std::string>{};
  const int64_t n_bpe = o.vocab - kAddedTokens - static_cast<int64_t>(extra.size());
  if (n_bpe < 257) fail("make-model: --vocab ", o.vocab, " leaves no room for BPE merges after the script's tokens");
  // Train the tokenizer before touching the directory: a too-short training
  // text fails here with nothing written.
  const std::vector<std::string> tokens =
      train_bpe(kTrainingText, static_cast<size_t>(n_bpe - 256), Pretokenizer(kQwen3Pattern));
  if (static_cast<int64_t>(tokens.size()) != n_bpe)
    fail("make-model: BPE training produced ", tokens.size(), " tokens, wanted ", n_bpe);
  const json tokenizer = qwen3_tokenizer_json(tokens, extra);
  std::optional<ScriptedWeights> scripted;
  if (o.script) {
    if (o.tied) fail("make-model: a scripted checkpoint needs untied embeddings (its lm_head is the bigram table)");
    scripted.emplace(*o.script, tokens, o.vocab, o.hidden);
  }
  auto write = [&](SafetensorsWriter& w, const TensorSpec& t) {
    if (scripted && scripted->writes(t))
      scripted->write(w, t);
    else
      write_tensor(w, t, o.seed, o.tied, o.shaper);
  };

  prepare_checkpoint_dir(o.out_dir, o.force);
  uint64_t payload = 0;
  if (o.shards == 1) {
    SafetensorsWriter w((fs::path(o.out_dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
    for (const TensorSpec& t : tensors) write(w, t);
    w.commit();
    payload = w.payload_bytes();
  } else {
    json weight_map = json::object();
    const std::vector<std::vector<TensorSpec>> shards = plan_shards(tensors, o.shards);
    for (int s = 0; s < o.shards; ++s) {
      const std::string name = shard_file_name(s + 1, o.shards, 5);  // Hugging Face's usual names
      SafetensorsWriter w((fs::path(o.out_dir) / name).string(), shards[s], {{"format", "pt"}});
      for (const TensorSpec& t : shards[s]) {
        write(w, t);
        weight_map[t.name] = name;
      }
      w.commit();
      payload += w.payload_bytes();
    }
    json index = {{"metadata", {{"total_size", payload}}}, {"weight_map", weight_map}};
    write_file_atomic((fs::path(o.out_dir) / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  }
  write_file_atomic((fs::path(o.out_dir) / "tokenizer.json").string(), tokenizer.dump(2) + "\n");
  write_file_atomic((fs::path(o.out_dir) / "tokenizer_config.json").string(),
                    tokenizer_config_json(static_cast<uint32_t>(n_bpe), o.max_positions, extra).dump(2) + "\n");
  // config.json last: its presence marks a complete checkpoint.
  write_file_atomic((fs::path(o.out_dir) / "config.json").string(), config_json.dump(2) + "\n");
  return payload;
}

}  // namespace deltafin
