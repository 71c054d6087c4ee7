// Descriptor flags set after the fact, for systems whose calls cannot set
// them on creation (accept4, SOCK_NONBLOCK / SOCK_CLOEXEC, pipe2 and eventfd
// flags are Linux's; macOS has none of them).
#pragma once

namespace deltafin::platform {

// O_NONBLOCK on the file status flags and FD_CLOEXEC on the descriptor
// flags, each by fcntl. false with errno set when a call fails.
bool set_nonblocking_cloexec(int fd);

}  // namespace deltafin::platform
