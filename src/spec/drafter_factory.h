// `--draft` specs to drafters:
//   none           plain decoding
//   ngram          prompt lookup (spec/ngram_drafter.h)
//   replay:FILE    the oracle of benchmarks: replays FILE's token ids (a
//                  previous run's --tokens-out) after the prompt
// (dspark:DIR and model:DIR join when their drafters land.)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "spec/drafter.h"

namespace deltafin {

// nullptr for "none"; errors name the spec and what is wrong with it.
std::unique_ptr<Drafter> make_drafter(const std::string& spec, const LoadedK3& model, const std::vector<uint32_t>& prompt);

}  // namespace deltafin
