// Test-only knobs for the io part: simulate environments this machine may not
// be (io_uring refused in a container, O_DIRECT refused by tmpfs) and read
// outcomes no healthy drive gives on demand (short reads, I/O errors, a file
// that ends early). Process-wide; set them before making an ExpertReader and
// reset them (0) afterwards.
#pragma once

#include <cstdint>

namespace deltafin::io_test_hooks {

// Non-zero: io_uring setup in the next readers fails with this errno (EPERM, ENOSYS).
void set_uring_init_error(int err);
// Non-zero: every direct open (O_DIRECT, F_NOCACHE on macOS) fails with this
// errno (EINVAL = direct I/O refused).
void set_direct_open_error(int err);
// Non-zero: every read returns at most this many bytes, as a kernel may (a
// short read): the bytes past them in the buffer are overwritten, as if they
// never arrived, so whatever reads the rest must really read it.
void set_short_reads(uint64_t max_bytes);
// times > 0: the next `times` reads, on either backend, report `result`
// instead of what they did: -errno (-EIO, -EINTR), 0 (the file ended), or a
// byte count. Counted down across all readers.
void set_read_result(int64_t result, int times);

}  // namespace deltafin::io_test_hooks
