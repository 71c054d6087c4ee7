// A short read-bandwidth probe of one drive directory, run by setup so that
// placement can weight drives by speed (design.md §3). It writes a probe file,
// reads it back with direct I/O from a few threads (the reader keeps several
// reads in flight per drive too), and deletes it.
#pragma once

#include <cstdint>
#include <string>

namespace deltafin {

struct DriveProbeResult {
  double bytes_per_s = 0;
  bool direct = true;  // false: direct I/O was refused (e.g. tmpfs); buffered reads after dropping the page cache
  uint64_t bytes_read = 0;
  double seconds = 0;
  // "probed with O_DIRECT" (F_NOCACHE on macOS), or "probed with buffered reads (O_DIRECT refused)".
  std::string method() const;
};

// Reads at most `file_bytes` (a multiple of 4 MiB) or for about `max_seconds`,
// whichever comes first. Errors name the directory.
DriveProbeResult probe_drive(const std::string& dir, uint64_t file_bytes = 256ull << 20, double max_seconds = 0.4);

}  // namespace deltafin
