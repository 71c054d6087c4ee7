// What `deltafin make-model` asks of a family's checkpoint generator: where
// to write, which preset and seed, and the command line's dimension
// overrides (unset: the preset's value). Each family's maker
// (src/model/<family>/*make_checkpoint.h) says which overrides apply to it
// and refuses the others by name; the registry picks the maker by --arch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deltafin {

struct DimOverrides {
  std::optional<int64_t> hidden, layers, experts, top_k, vocab, latent, moe_intermediate, intermediate;
};

struct MakeCheckpointRequest {
  std::string out;
  std::string preset = "tiny";     // tiny, small, bench, k3 (which a family accepts is its own)
  std::string target;              // a drafter's target checkpoint (k3_dspark only)
  std::string flavor;              // deepseek_v3 only: which release's layout (empty: the family's default)
  uint64_t seed = 1;
  uint64_t shard_bytes = 4096ull << 20;
  bool force = false;              // overwrite an existing checkpoint in `out`
  bool progress = true;
  DimOverrides dims;
  // qwen3_moe only: a checkpoint whose greedy output after the generation
  // prompt is these tokens (model/qwen3/qwen3_scripted.h), for testing clients
  // against known output such as tool calls; empty: random weights.
  std::vector<std::string> script;
  // kimi_k3 and qwen3_moe: a routing profile (model/common/routing_profile.h)
  // for benchmark checkpoints with controlled expert popularity and locality;
  // "uniform" (the default) changes nothing.
  std::string routing_profile = "uniform";
};

}  // namespace deltafin
