// Other POSIX systems (neither Linux nor macOS): what POSIX and common
// extensions offer. Not tested anywhere; a system deltafin is ported to should
// get its own file, as Linux and macOS have.
#if !defined(__linux__) && !defined(__APPLE__)

#include <sys/resource.h>
#include <unistd.h>

#include "platform/memory.h"

namespace deltafin::platform {

uint64_t available_memory_bytes() {
#if defined(_SC_AVPHYS_PAGES)
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
#endif
  return 0;
}

uint64_t memory_limit_bytes() { return 0; }

uint64_t current_rss_bytes() { return 0; }

uint64_t peak_rss_bytes() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;  // KiB on the BSDs and Solaris
}

}  // namespace deltafin::platform

#endif
