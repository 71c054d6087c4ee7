// Linux: /proc and the cgroup file system.
#if defined(__linux__)

#include "platform/memory.h"

namespace deltafin::platform {

uint64_t available_memory_bytes() { return detail::kb_field("/proc/meminfo", "MemAvailable"); }

uint64_t memory_limit_bytes() { return detail::cgroup_memory_limit("/proc/self/cgroup", "/sys/fs/cgroup"); }

uint64_t current_rss_bytes() { return detail::kb_field("/proc/self/status", "VmRSS"); }

uint64_t peak_rss_bytes() { return detail::kb_field("/proc/self/status", "VmHWM"); }

}  // namespace deltafin::platform

#endif
