// Generates a DSpark checkpoint matching a K3-architecture target (k3-model.md
// §10.2, §14): config.json with every field of the released config, scaled to
// the target, and model.safetensors (BF16, seeded random weights scaled so
// activations stay of order 1; embed_tokens copied byte for byte from the
// target). Both files are written atomically; config.json last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/common/make_checkpoint.h"
#include "model/kimi_k3/config.h"
#include "model/k3_dspark/config.h"

namespace deltafin {

// The dimensions of a DSpark drafter; everything else in its config is fixed
// (YaRN parameters, flags) or taken from the target (vocabulary, reserved ids).
struct DSparkDims {
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0;
  int64_t q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v_dim = 0, markov_rank = 0;
  std::vector<int64_t> target_layer_ids;
};

// The real drafter's dimensions for the real K3 (hidden 7168, 93 layers);
// for any other target the §14 scaling: hidden = the target's, heads
// max(2, hidden/64), q_lora = kv_lora = hidden/2, nope/rope/v 16/8/16,
// intermediate 2·hidden, markov_rank 16, and min(5, L) capture layers spread
// evenly ((2i+1)·L / 10). `layers` (1..5; 0 = 5 for K3, 2 otherwise) sets
// num_hidden_layers.
DSparkDims dspark_dims_for_target(const K3Config& target, int64_t layers = 0);

// config.json for these dimensions, matching `target`.
nlohmann::json dspark_config_json(const DSparkDims& dims, const K3Config& target);

struct DSparkGenerateOptions {
  int64_t layers = 0;  // num_hidden_layers; 0 = the default above
  bool force = false;  // overwrite an existing checkpoint in out_dir
};

// Reads the target's config.json and embedding from target_dir, writes the
// drafter to out_dir and returns its config (as the runtime parses it).
DSparkConfig generate_dspark_checkpoint(const std::string& target_dir, const std::string& out_dir, uint64_t seed,
                                        const DSparkGenerateOptions& options = {});

// `deltafin make-model --arch k3_dspark`: a DSpark drafter for the K3
// checkpoint in request.target (its dimensions come from there; only
// --layers, DSpark layers 1..5, applies); returns the lines to print.
std::string make_dspark_checkpoint(const MakeCheckpointRequest& request);

}  // namespace deltafin
