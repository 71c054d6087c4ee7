// printf-style formatting into a std::string, for the summary lines that
// commands print (g++ 12 has no std::format).
#pragma once

#include <string>

namespace deltafin {

[[gnu::format(printf, 1, 2)]] std::string strformat(const char* fmt, ...);

}  // namespace deltafin
