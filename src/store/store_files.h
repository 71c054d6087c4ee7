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

// Removes "<name>.tmp-<pid>" files (util/file.h AtomicFile's temporaries) in
// dir whose writer process no longer exists; returns how many. A live
// writer's temporary is left alone.
int remove_stale_temps(const std::string& dir);

}  // namespace deltafin
