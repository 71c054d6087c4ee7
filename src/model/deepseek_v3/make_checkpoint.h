// `deltafin make-model --arch deepseek_v3`: the family's checkpoint maker,
// reached through model/registry.h.
#pragma once

#include <string>

#include "model/common/make_checkpoint.h"

namespace deltafin {

// The preset (tiny, small, bench) of --flavor (deepseek_v3 by default,
// deepseek_v3_q_proj, kimi_k2, kimi_k2_thinking) with --hidden, --layers,
// --experts, --top-k, --vocab, --moe-intermediate and --intermediate applied
// (--latent and --script refused); returns the lines to print.
std::string make_deepseek_v3_checkpoint(const MakeCheckpointRequest& request);

}  // namespace deltafin
