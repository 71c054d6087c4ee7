// Small random Qwen3 dense checkpoints in exactly the Hugging Face layout, for
// tests and as a stand-in draft model (`make-model --arch qwen3`):
// config.json, model.safetensors (or shards with model.safetensors.index.json),
// tokenizer.json (byte-level BPE in the `tokenizers` format Qwen3 uses, trained
// on the built-in text) and tokenizer_config.json. Weights are seeded random
// BF16, scaled so activations stay of order 1. Every file is written
// atomically (temporary name, fsync, rename); config.json comes last, so a
// directory with a config.json holds a complete checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "format/safetensors_writer.h"
#include "model/common/make_checkpoint.h"
#include "model/qwen3/qwen3_config.h"
#include "model/qwen3/qwen3_scripted.h"

namespace deltafin {

class RoutingShaper;

// The added tokens after the BPE vocabulary, in Qwen3's order: <|endoftext|>,
// <|im_start|>, <|im_end|> (special), <tool_call>, </tool_call>,
// <tool_response>, </tool_response>, <think>, </think> (not special, as in
// the released tokenizer.json).
inline constexpr int kQwen3AddedTokens = 9;
// The spelling of added token i (0 .. kQwen3AddedTokens - 1) in that order.
const char* qwen3_added_token(int i);

struct Qwen3GenerateOptions {
  std::string out_dir;
  uint64_t seed = 1;
  // Dimensions. head_dim deliberately differs from hidden / heads by default,
  // as in real Qwen3 configs.
  int64_t hidden = 64, intermediate = 160, layers = 2, heads = 4, kv_heads = 2, head_dim = 32;
  // vocab_size of the config (embedding rows): vocab - kQwen3AddedTokens
  // byte-level BPE tokens (256 bytes + merges), then the added tokens.
  int64_t vocab = 512;
  int64_t max_position_embeddings = 4096;
  double rope_theta = 1000000.0, rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  int shards = 1;      // 1: model.safetensors; N > 1: N shards + model.safetensors.index.json
  bool force = false;  // overwrite an existing checkpoint in out_dir
};

struct Qwen3GenerateResult {
  Qwen3Config config;  // as the runtime parses the config.json written
  uint64_t payload_bytes = 0;
  int shards = 0;
  size_t tensors = 0;
};

Qwen3GenerateResult generate_qwen3_checkpoint(const Qwen3GenerateOptions& options);

// What every Qwen-family generator writes around its own tensor list: the
// seeded BF16 tensors (one file or `shards` with the index), tokenizer.json
// and tokenizer_config.json for `vocab` ids (vocab - kQwen3AddedTokens BPE
// tokens trained on the built-in text, then the added tokens), and
// config_json last.
// Returns the tensors' payload bytes.
struct Qwen3CheckpointFiles {
  std::string out_dir;
  uint64_t seed = 1;
  bool force = false;
  int shards = 1;
  int64_t vocab = 0;
  int64_t max_positions = 0;  // tokenizer_config.json's model_max_length
  bool tied = false;          // embeddings scaled to also make the logits
  // Set: the checkpoint's greedy output follows this script (qwen3_scripted.h);
  // its extra tokens come after the added ones, within `vocab`.
  const ScriptedOutput* script = nullptr;
  int64_t hidden = 0;  // the config's hidden_size (for the scripted tensors)
  // Set: a routing profile's row factors (model/common/routing_profile.h).
  const RoutingShaper* shaper = nullptr;
};
uint64_t write_qwen3_checkpoint_files(const Qwen3CheckpointFiles& files, const std::vector<TensorSpec>& tensors,
                                      const nlohmann::json& config_json);

// The tokenizer.json for `tokens` (byte strings indexed by id, 256 single
// bytes first, as train_bpe returns them), with the added tokens at ids
// tokens.size() .. + kQwen3AddedTokens - 1. Exposed for tests.
// `extra_added`: further added tokens (non-special) after those.
nlohmann::json qwen3_tokenizer_json(const std::vector<std::string>& tokens,
                                    const std::vector<std::string>& extra_added = {});

// Qwen2/Qwen3's pre-tokenizer regex, as tokenizer.json writes it.
extern const char* const kQwen3Pattern;

// `deltafin make-model --arch qwen3`: a small dense draft model (--draft
// model:DIR); only --hidden, --layers, --vocab and --intermediate apply.
// Returns the lines to print.
std::string make_qwen3_checkpoint(const MakeCheckpointRequest& request);

}  // namespace deltafin
