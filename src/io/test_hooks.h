// Test-only knobs for the io part: simulate environments this machine may not
// be (io_uring refused in a container, O_DIRECT refused by tmpfs). Process-wide;
// set them before making an ExpertReader and reset them (0) afterwards.
#pragma once

namespace deltafin::io_test_hooks {

// Non-zero: io_uring setup in the next readers fails with this errno (EPERM, ENOSYS).
void set_uring_init_error(int err);
// Non-zero: every direct open (O_DIRECT, F_NOCACHE on macOS) fails with this
// errno (EINVAL = direct I/O refused).
void set_direct_open_error(int err);

}  // namespace deltafin::io_test_hooks
