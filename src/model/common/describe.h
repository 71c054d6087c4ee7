// What `deltafin inspect` prints that every family shares.
#pragma once

#include <cstdint>

namespace deltafin {

// Session memory at 32k, 128k and 1M positions (the memory plan's figure; no
// session is made): the fixed state plus bytes per position times positions.
void print_session_figures(uint64_t fixed, uint64_t per_position, int64_t max_positions, const char* what);

}  // namespace deltafin
