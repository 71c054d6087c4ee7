// `deltafin make-model`: writes a K3-architecture checkpoint in exactly the
// real Hugging Face layout (k3-model.md §14): config.json, at least two
// safetensors shards with model.safetensors.index.json, tiktoken.model and
// tokenizer_config.json. Weights are seeded random, scaled so activations stay
// of order 1; MXFP4 experts are packed like the real ones. Tensors are
// generated and written in bounded chunks, so checkpoints larger than RAM work.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "model/common/make_checkpoint.h"
#include "model/kimi_k3/config.h"
#include "model/kimi_k3/presets.h"

namespace deltafin {

struct GenerateOptions {
  std::string out_dir;
  uint64_t seed = 1;
  K3Dims dims;
  uint64_t shard_bytes = 4ull << 30;  // target size per shard (at least two shards are written)
  bool force = false;                 // overwrite an existing checkpoint in out_dir
  bool progress = true;
  // A routing profile (model/common/routing_profile.h); empty or "uniform": none.
  std::string routing_profile;
};

struct GenerateResult {
  K3Config config;  // the config written, as the runtime parses it
  uint64_t payload_bytes = 0;
  int shards = 0;
  size_t tensors = 0;
  double seconds = 0;
};

GenerateResult generate_k3_checkpoint(const GenerateOptions& options);

// The config.json the generator writes for these dimensions (every field of §2).
nlohmann::json k3_config_json(const K3Dims& d);

// `deltafin make-model --arch kimi_k3`: the preset with every override
// applied; returns the lines to print (what was written, and that the
// weights are random).
std::string make_k3_checkpoint(const MakeCheckpointRequest& request);

}  // namespace deltafin
