// What the memory plan and the stats need to know about RAM, per system.
// Each returns 0 when the system does not say (the callers treat 0 as
// "unknown": the plan then leaves the expert cache at its working set).
#pragma once

#include <cstdint>
#include <string>

namespace deltafin::platform {

// RAM the system could give this process without swapping. Linux:
// MemAvailable (/proc/meminfo: free memory plus the page cache and slabs the
// kernel can reclaim). macOS: free plus inactive pages (host_statistics64),
// at most hw.memsize: the pages macOS hands out before it compresses or swaps.
// Elsewhere: sysconf(_SC_AVPHYS_PAGES) where it exists.
uint64_t available_memory_bytes();
// The memory limit of the cgroup this process runs in (Linux, cgroup v1 or
// v2; the lowest along /proc/self/cgroup's lines); 0 when none, and
// always 0 elsewhere (macOS has no such limit).
uint64_t memory_limit_bytes();
// This process's resident set now and at its peak. Linux: VmRSS and VmHWM
// (/proc/self/status). macOS: task_info's resident_size and getrusage's
// ru_maxrss (bytes there). Elsewhere: ru_maxrss (KiB there) and no current
// figure.
uint64_t current_rss_bytes();
uint64_t peak_rss_bytes();

// Internal, public for tests: the Linux files' parsers, on any paths.
namespace detail {
// "Key:   123 kB" in a /proc status-style file, in bytes; 0 when absent.
uint64_t kb_field(const std::string& path, const std::string& key);
// The lowest memory limit named by a /proc/self/cgroup-style file, read
// under cgroup_root (normally /sys/fs/cgroup): v2 lines "0::/path" ->
// root/path/memory.max; v1 lines "N:...memory...:/path" ->
// root/memory/path/memory.limit_in_bytes. 0 when none ("max" counts as none).
uint64_t cgroup_memory_limit(const std::string& proc_cgroup, const std::string& cgroup_root);
}  // namespace detail

}  // namespace deltafin::platform
