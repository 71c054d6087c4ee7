// The --lookahead auto idle-window gate, as plain arithmetic (used by
// StreamingExpertSource::prefetch). A right prediction read early saves time
// only while the drives would otherwise be idle before its layer asks for it
// (its demand read lands sooner); past that window it saves nothing (the
// demand read would have taken the same drive time), while every wrong one
// read costs its bytes and delays the next demand read. So only as many
// predictions are read as the drives can read in the measured window.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace deltafin {

// Reads that fit an idle window of idle_s seconds on drives reading
// bytes_per_s together: floor(idle_s x bytes_per_s / expert_bytes), 0 for a
// window of 0 or less.
size_t idle_window_reads(double idle_s, double bytes_per_s, uint64_t expert_bytes);

// The predictions to issue, in their order (most confident first): those
// already in RAM or on their way (in_ram: they cost no read) always, the
// others until `budget` of them; *dropped counts the rest.
std::vector<int64_t> within_read_budget(std::span<const int64_t> experts, size_t budget,
                                        const std::function<bool(int64_t)>& in_ram, size_t* dropped);

// One step of an exponential moving average that starts at its first sample
// (ema < 0 means none yet).
double ema_step(double ema, double sample, double alpha);

}  // namespace deltafin
