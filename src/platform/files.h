// File calls that differ between Linux and macOS: reads that bypass the page
// cache, dropping cached pages, and flushing a file's data to the drive.
//
// Why direct reads: the expert cache is given a RAM budget, and reads through
// the page cache would spend RAM outside it (design.md §4). Linux has O_DIRECT
// (reads must then be aligned: buffer, offset and length to 4096); macOS has
// fcntl(F_NOCACHE), set on an open descriptor (alignment only helps speed).
#pragma once

#include <cstdint>
#include <string>

namespace deltafin::platform {

// How direct reads are made here, for messages: "O_DIRECT", "F_NOCACHE", or
// "direct I/O" on a system with neither.
const char* direct_io_name();
// Opens path read-only and close-on-exec, bypassing the page cache. Returns the
// descriptor, or -errno. -EINVAL means direct reads are refused for this file
// (tmpfs and some FUSE file systems refuse O_DIRECT; a system with neither
// O_DIRECT nor F_NOCACHE always says so): the caller may open it buffered and
// drop what it read with drop_page_cache.
int open_direct(const std::string& path);

// Whether drop_page_cache can do anything here: posix_fadvise with
// POSIX_FADV_DONTNEED exists (Linux, the BSDs) or not (macOS).
bool can_drop_page_cache();
// Asks the kernel to drop fd's cached pages in [offset, offset + len) (len 0:
// to the end of the file). Returns 0 or an errno value (posix_fadvise's
// convention: errno itself is not set). Where there is no such call (macOS),
// it does nothing and returns ENOTSUP: macOS's direct reads (F_NOCACHE) keep
// the pages out of the cache in the first place, and nothing evicts pages
// that other reads cached.
int drop_page_cache(int fd, uint64_t offset, uint64_t len);

// Flushes fd's data (not necessarily its metadata) to stable storage:
// fdatasync on Linux; on macOS, where fdatasync is not declared and fsync does
// not flush the drive's cache, fcntl(F_FULLFSYNC), or fsync where the file
// system refuses that. Returns 0, or -1 with errno set.
int sync_data(int fd);
// The call sync_data makes here, for messages: "fdatasync", "F_FULLFSYNC", "fsync".
const char* sync_data_name();

}  // namespace deltafin::platform
