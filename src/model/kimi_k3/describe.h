// `deltafin inspect` for a K3 checkpoint: loads and validates it (every
// tensor's dtype and shape) and prints its layers, sizes and session memory;
// `verify` also checks every routed expert's MXFP4 scales (k3-model.md §4.3).
#pragma once

#include <string>

namespace deltafin {

void describe_k3_checkpoint(const std::string& dir, bool verify);

}  // namespace deltafin
