// Token ids given on the command line ("1,2,3"), for logits --tokens and
// run --prompt-ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deltafin::cli {

// Comma-separated non-negative integers; errors name `option`.
std::vector<uint32_t> parse_token_list(const std::string& s, const std::string& option);
// Every id below vocab, else an error naming `option` and the id.
void check_token_ids(const std::vector<uint32_t>& ids, int64_t vocab, const std::string& option);

}  // namespace deltafin::cli
