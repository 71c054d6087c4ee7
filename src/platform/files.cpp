#include "platform/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace deltafin::platform {

const char* direct_io_name() {
#if defined(O_DIRECT)
  return "O_DIRECT";
#elif defined(__APPLE__)
  return "F_NOCACHE";
#else
  return "direct I/O";
#endif
}

int open_direct(const std::string& path) {
#if defined(O_DIRECT)
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  return fd >= 0 ? fd : -errno;
#elif defined(__APPLE__)
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  if (::fcntl(fd, F_NOCACHE, 1) == 0) return fd;
  ::close(fd);
  return -EINVAL;  // refused: the caller's buffered fallback, as for O_DIRECT
#else
  (void)path;
  return -EINVAL;
#endif
}

bool can_drop_page_cache() {
#if defined(POSIX_FADV_DONTNEED)
  return true;
#else
  return false;
#endif
}

int drop_page_cache(int fd, uint64_t offset, uint64_t len) {
#if defined(POSIX_FADV_DONTNEED)
  return ::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(len), POSIX_FADV_DONTNEED);
#else
  (void)fd, (void)offset, (void)len;
  return ENOTSUP;
#endif
}

int sync_data(int fd) {
#if defined(__APPLE__)
  if (::fcntl(fd, F_FULLFSYNC) == 0) return 0;
  return ::fsync(fd);
#elif defined(__linux__)
  return ::fdatasync(fd);
#else
  return ::fsync(fd);  // fdatasync is optional in POSIX
#endif
}

const char* sync_data_name() {
#if defined(__APPLE__)
  return "F_FULLFSYNC";
#elif defined(__linux__)
  return "fdatasync";
#else
  return "fsync";
#endif
}

}  // namespace deltafin::platform
