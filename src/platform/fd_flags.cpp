#include "platform/fd_flags.h"

#include <fcntl.h>

namespace deltafin::platform {

bool set_nonblocking_cloexec(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return false;
  const int fd_fl = ::fcntl(fd, F_GETFD);
  return fd_fl >= 0 && ::fcntl(fd, F_SETFD, fd_fl | FD_CLOEXEC) == 0;
}

}  // namespace deltafin::platform
