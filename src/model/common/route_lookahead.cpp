#include "model/common/route_lookahead.h"

#include "util/error.h"

namespace deltafin {

const char* lookahead_mode_name(LookaheadMode m) {
  switch (m) {
    case LookaheadMode::Off: return "off";
    case LookaheadMode::On: return "on";
    case LookaheadMode::Auto: return "auto";
  }
  return "?";
}

LookaheadMode parse_lookahead_mode(const std::string& s) {
  if (s == "off") return LookaheadMode::Off;
  if (s == "on") return LookaheadMode::On;
  if (s == "auto") return LookaheadMode::Auto;
  fail("--lookahead: '", s, "' is not one of on, off, auto");
}

}  // namespace deltafin
