// What the engine and its reports see of a family's route lookahead (the
// family predicts layer L+1's experts while layer L runs and prefetches
// them; Kimi K3 has it, model/kimi_k3/lookahead.h): its mode, its counters
// and a per-layer description of its gates. Predictions only start reads;
// the router decides, so nothing here can change an output bit.
#pragma once

#include <cstdint>
#include <string>

namespace deltafin {

// off: no lookahead reads. on: always prefetch the prediction. auto (default):
// the §11 gate — per layer the better of PILOT and previous-token (by an EMA
// of recall, after 16 samples) is used, and reads stop while its EMA < 0.10.
enum class LookaheadMode { Off, On, Auto };
const char* lookahead_mode_name(LookaheadMode m);
LookaheadMode parse_lookahead_mode(const std::string& s);  // else a named error

struct LookaheadCounters {
  uint64_t predicted_layers = 0;   // layers with a PILOT prediction scored
  uint64_t pilot_hits = 0;         // |PILOT ∩ actual| summed
  uint64_t actual = 0;             // |actual| summed over those layers
  uint64_t issued_layers = 0;      // layers whose prediction was prefetched
  uint64_t issued_experts = 0, issued_hits = 0;  // prefetched experts, and those the layer then used
  uint64_t suppressed_layers = 0;  // layers the gate kept quiet
};

// The read-only side of a family's route lookahead.
class RouteLookaheadReport {
public:
  virtual ~RouteLookaheadReport() = default;
  virtual LookaheadMode mode() const = 0;
  virtual const LookaheadCounters& counters() const = 0;
  // One line per layer: the predictor chosen, its recall EMA and samples.
  virtual std::string describe_gates() const = 0;
};

}  // namespace deltafin
