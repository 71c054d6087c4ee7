// The pinned Kimi K3 release's metadata files (k3-model.md §2.5). When they
// match, the runtime reports "Kimi K3 (pinned revision)" and the token oracles
// apply; otherwise it is a "K3-architecture checkpoint".
#pragma once

#include <string>

namespace deltafin {

bool matches_pinned_k3(const std::string& dir);
std::string describe_checkpoint_identity(const std::string& dir);

}  // namespace deltafin
