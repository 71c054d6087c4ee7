// File chores shared by setup and doctor: hashing a file as it is on the
// drive, free space, and removing temporaries left by a crashed writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/sha256.h"

namespace deltafin {

// SHA-256 (and CRC-32C when crc != nullptr) of a whole file, read in bounded
// chunks. `drop_cache` first asks the kernel to drop the file's cached pages,
// so a read-back after writing checks the drive rather than RAM.
Sha256Digest hash_file(const std::string& path, bool drop_cache, uint32_t* crc = nullptr);
// One SHA-256 over the files' bytes in order (a striped expert's stripes) and,
// when crcs is given, each file's CRC-32C.
Sha256Digest hash_files(const std::vector<std::string>& paths, bool drop_cache, std::vector<uint32_t>* crcs = nullptr);

// Bytes an unprivileged writer may still use on the filesystem holding path.
uint64_t free_bytes(const std::string& path);

// The device id of the filesystem holding path (drives on one filesystem share its space).
uint64_t device_of(const std::string& path);

// Whether a file name is a temporary of a deltafin writer: "<name>.tmp-<pid>"
// (util/file.h AtomicFile) or "deltafin-probe.tmp-<pid>" (the drive probe).
// *pid gets the pid, or -1 when the digits are too many for one.
bool is_temp_name(const std::string& name, long long* pid = nullptr);

struct TempsRemoved {
  uint64_t files = 0, bytes = 0;
  TempsRemoved& operator+=(const TempsRemoved& o) {
    files += o.files, bytes += o.bytes;
    return *this;
  }
};

// Removes every temporary regular file in dir (only names starting with
// `prefix` when one is given), whatever pid it names, except this process's
// own. Only for setup, which holds the store's lock exclusively (StoreLock,
// store/install.h): every other writer there holds it shared while its
// temporary exists, so none is alive. A missing dir removes nothing.
TempsRemoved remove_temps(const std::string& dir, const std::string& prefix = "");

// The directories setup sweeps with remove_temps, each with its name prefix:
// the store directory, spine/ and remote/; each drive's own directory (the
// probe's temporaries only: it may hold other people's files); each
// directory under each drive's deltafin-experts.
struct TempPlace {
  std::string dir, prefix;
};
std::vector<TempPlace> store_temp_places(const std::string& store, const std::vector<std::string>& drives);

// Removes temporaries in dir whose writer process no longer exists; returns
// how many. For a writer that cannot hold the store's lock exclusively (the
// mirror fetcher at start, beside other runs): a pid that was reused keeps a
// dead writer's file until the next setup (doctor lists it).
int remove_stale_temps(const std::string& dir);

}  // namespace deltafin
