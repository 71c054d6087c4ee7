// deltafin doctor: checks a store against its manifest and reports every problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deltafin {

struct DoctorReport {
  uint64_t files_checked = 0, bytes_hashed = 0;
  std::vector<std::string> problems;  // each names the file (and layer/expert) and what is wrong
  uint64_t not_fetched = 0;           // streamed store: experts still only on the mirror (not a problem)
  bool ok() const { return problems.empty(); }
};

// Manifest, spine and expert files present with the right sizes; with `full`,
// every SHA-256 as well.
DoctorReport run_doctor(const std::string& store_dir, bool full);
// The same with a progress line on stderr (for --full) and `threads` hashing in parallel.
DoctorReport run_doctor(const std::string& store_dir, bool full, bool progress, int threads);

}  // namespace deltafin
