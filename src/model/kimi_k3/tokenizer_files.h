// tiktoken.model and tokenizer_config.json for generated checkpoints: a BPE
// vocabulary trained on a built-in text (all 256 bytes + merges) and K3's 256
// reserved tokens at the end, with K3's spellings in K3's order (§14).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deltafin {

// The rank-indexed tokens: 256 single bytes then n_ranks - 256 merges.
std::vector<std::string> generated_vocabulary(int64_t n_ranks);

// Writes both files into dir (atomically). n_ranks = vocab_size - 256.
void write_k3_tokenizer_files(const std::string& dir, int64_t n_ranks);

}  // namespace deltafin
