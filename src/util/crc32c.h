// CRC-32C (Castagnoli), the per-read check of expert bytes. SHA-256 proves at
// setup (and in `doctor --full`) that a file holds the released bytes; on the
// hot path a CRC-32C recorded beside it catches a flipped or stale byte at
// ~10 GB/s per core, where SHA-256 would cost a core per 1-2 GB/s of reads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deltafin {

// crc32c("123456789") == 0xE3069283. `crc` continues a previous call's result.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

// The table-driven reference (tests compare the hardware path with it).
uint32_t crc32c_portable(const void* data, size_t size, uint32_t crc = 0);

}  // namespace deltafin
