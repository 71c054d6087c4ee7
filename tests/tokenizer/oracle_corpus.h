// The seeded corpus the tiktoken oracle test encodes on both sides: prose,
// code, whitespace of every kind, CJK, Korean, emoji sequences, combining
// marks, digits, many scripts, contractions, every ordered pair of boundary
// "atoms", random atom soups and a few very long runs. Only characters
// assigned by Unicode 8.0 (most by 2.0), so PCRE2 10.42's tables (Unicode 14)
// and the Rust regex crate's (Unicode 15) agree on all of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deltafin::test {

std::vector<std::string> oracle_corpus(uint64_t seed, size_t min_strings);

// Strings with special-token spellings of cl100k_base / o200k_base in them.
std::vector<std::string> oracle_special_texts();

}  // namespace deltafin::test
