// deltafin setup: a Hugging Face checkpoint directory -> a deltafin store.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/common/family_checkpoint.h"
#include "store/store_manifest.h"

namespace deltafin {

struct SetupOptions {
  std::string from;                  // HF checkpoint directory
  std::string store;                 // store directory (manifest, spine, tokenizer files, heat)
  std::vector<std::string> drives;   // expert directories, one per drive
  std::string spine = "auto";        // auto | bf16 | int8
  int64_t replicate_hot = 0;         // hottest experts copied to a second drive
  // whole: each expert file holds a whole record on one drive (or two, when
  // replicated); striped: each expert is cut into one stripe per drive, so
  // every read uses all drives at once. auto: striped over 2+ drives unless
  // --replicate-hot or --stream asks for whole files, or the records are
  // smaller than 1 MiB per drive.
  std::string layout = "auto";
  std::optional<double> ram_gb;      // RAM budget for --spine auto; default: physical RAM
  std::vector<double> drive_mbps;    // skip the probe and use these (MB/s, one per drive)
  uint64_t probe_bytes = 256ull << 20;  // bandwidth probe file per drive (tests use less)
  int threads = 1;
  bool quiet = false;                // no progress line (tests)

  // setup --stream (src/remote): the checkpoint was opened from a mirror
  // (`from` then holds its downloaded config, tokenizer and index files).
  // The spine is written as usual; experts are not copied, only placed, and
  // the manifest gets `remote`. write_remote_files runs after the spine and
  // before the manifest (which marks the store complete).
  const FamilyCheckpoint* checkpoint = nullptr;
  std::optional<RemoteSource> remote;
  std::function<void(const std::string& store)> write_remote_files;

  // Test hooks (the CLI reads them from DELTAFIN_SETUP_STOP_AFTER and
  // DELTAFIN_FAKE_FREE_BYTES): raise SIGINT after this many expert files are
  // written (0 = never), so a test interrupts at an exact point through the
  // real Ctrl-C path (exact with threads = 1; other threads may finish a file
  // more); and pretend every filesystem has this many free bytes.
  uint64_t stop_after_experts = 0;
  std::optional<uint64_t> fake_free_bytes;
};

struct SetupReport {
  uint64_t experts_written = 0, experts_skipped = 0, bytes_written = 0;  // files (stripes count one each)
  std::string layout, layout_reason;
  std::string spine_format, spine_reason;
  std::vector<double> drive_bytes_per_s;
  uint64_t temps_removed = 0, temp_bytes_removed = 0;  // temporaries of interrupted writers, removed at start
  double seconds = 0;
};

SetupReport run_setup(const SetupOptions& options);

}  // namespace deltafin
