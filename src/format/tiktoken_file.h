// The tiktoken rank file (`tiktoken.model`, k3-model.md §8.1): one line per
// mergeable token, `base64(bytes) SP rank`, ranks contiguous 0..n-1 in file
// order, every single byte present. Token id = rank, so the parsed result is
// simply the token bytes indexed by rank.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deltafin {

// Parses rank-file text. `source` names the file in error messages, which also
// give the 1-based line number and what was wrong on it.
std::vector<std::string> parse_tiktoken_ranks(std::string_view text, const std::string& source);

// Reads and parses the rank file at `path`.
std::vector<std::string> read_tiktoken_file(const std::string& path);

// Checks a rank-indexed token list (however it was obtained): every token
// non-empty, no two tokens with the same bytes, all 256 single bytes present.
// `source` names where the list came from in error messages.
void validate_rank_tokens(const std::vector<std::string>& tokens, const std::string& source);

// The rank-file text for `tokens` (rank = index), one `base64 rank\n` line per
// token; validates the list first. The inverse of parse_tiktoken_ranks.
std::string format_tiktoken_ranks(const std::vector<std::string>& tokens);

// Standard base64 (RFC 4648 alphabet, '=' padding), as used in rank files.
std::string base64_encode(std::string_view bytes);

}  // namespace deltafin
