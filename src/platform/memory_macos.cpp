// macOS: Mach host and task statistics, sysctl and getrusage. Not compiled or
// run on the machines deltafin is tested on (Linux); written from Apple's
// documented interfaces.
#if defined(__APPLE__)

#include <mach/mach.h>
#include <sys/resource.h>
#include <sys/sysctl.h>

#include <algorithm>

#include "platform/memory.h"

namespace deltafin::platform {

namespace {

uint64_t physical_memory() {
  uint64_t bytes = 0;
  size_t len = sizeof bytes;
  if (::sysctlbyname("hw.memsize", &bytes, &len, nullptr, 0) != 0) return 0;
  return bytes;
}

}  // namespace

uint64_t available_memory_bytes() {
  // mach_host_self() hands out a send right each call: give it back.
  const mach_port_t host = ::mach_host_self();
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  const kern_return_t kr = ::host_statistics64(host, HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count);
  vm_size_t page = 0;
  const kern_return_t kp = ::host_page_size(host, &page);
  ::mach_port_deallocate(::mach_task_self(), host);
  if (kr != KERN_SUCCESS || kp != KERN_SUCCESS) return 0;
  // Inactive pages hold file data and memory not touched lately: macOS
  // reuses them before it compresses or swaps anything.
  const uint64_t avail = (static_cast<uint64_t>(vm.free_count) + vm.inactive_count) * page;
  const uint64_t total = physical_memory();
  return total > 0 ? std::min(avail, total) : avail;
}

uint64_t memory_limit_bytes() { return 0; }

uint64_t current_rss_bytes() {
  mach_task_basic_info_data_t info{};
  mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
  if (::task_info(::mach_task_self(), MACH_TASK_BASIC_INFO, reinterpret_cast<task_info_t>(&info), &count) != KERN_SUCCESS)
    return 0;
  return info.resident_size;
}

uint64_t peak_rss_bytes() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<uint64_t>(u.ru_maxrss);  // bytes on macOS (KiB on Linux and the BSDs)
}

}  // namespace deltafin::platform

#endif
