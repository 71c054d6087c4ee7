// deltafin doctor: checks a store against its manifest and reports every problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deltafin {

// A file in the store's own places that store.json does not name.
struct StrayFile {
  std::string path;
  uint64_t bytes = 0;
  bool temporary = false;  // "*.tmp-<pid>": an interrupted write's, or one in progress
};

struct DoctorReport {
  uint64_t files_checked = 0, bytes_hashed = 0;
  std::vector<std::string> problems;  // each names the file (and layer/expert) and what is wrong
  uint64_t not_fetched = 0;           // streamed store: experts still only on the mirror (not a problem)
  // Not problems (ok() ignores them): a stray file takes space but changes
  // nothing the store serves, since every read goes by a name of the
  // manifest; the store runs as it is. Told so the space can be reclaimed.
  std::vector<StrayFile> strays;
  bool ok() const { return problems.empty(); }
  uint64_t stray_bytes() const;
};

// Manifest, spine and expert files present with the right sizes; with `full`,
// every SHA-256 as well. Lists as strays every file under each drive's
// deltafin-experts tree and in spine/ that the manifest does not name (a
// streamed store's experts not fetched yet are absent, not stray; a file
// that is there under a name the placement does not give that drive is), and
// the temporaries in the store directory, remote/ and the drives' own
// directories (the places setup sweeps: store/store_files.h).
DoctorReport run_doctor(const std::string& store_dir, bool full);
// The same with a progress line on stderr (for --full) and `threads` hashing in parallel.
DoctorReport run_doctor(const std::string& store_dir, bool full, bool progress, int threads);

}  // namespace deltafin
