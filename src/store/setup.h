// deltafin setup: a Hugging Face checkpoint directory -> a deltafin store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deltafin {

struct SetupOptions {
  std::string from;                  // HF checkpoint directory
  std::string store;                 // store directory (manifest, spine, tokenizer files, heat)
  std::vector<std::string> drives;   // expert directories, one per drive
  std::string spine = "auto";        // auto | bf16 | int8
  int64_t replicate_hot = 0;         // hottest experts copied to a second drive
  std::optional<double> ram_gb;      // RAM budget for --spine auto; default: physical RAM
  std::vector<double> drive_mbps;    // skip the probe and use these (MB/s, one per drive)
  int threads = 1;
  bool quiet = false;                // no progress line (tests)
};

struct SetupReport {
  uint64_t experts_written = 0, experts_skipped = 0, bytes_written = 0;
  std::string spine_format, spine_reason;
  std::vector<double> drive_bytes_per_s;
  double seconds = 0;
};

SetupReport run_setup(const SetupOptions& options);

}  // namespace deltafin
