#include "io/chunk_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/aligned_buffer.h"
#include "io/test_hooks.h"
#include "platform/files.h"
#include "util/error.h"

namespace deltafin {

namespace {
std::atomic<int> g_direct_open_error{0};
std::atomic<uint64_t> g_short_reads{0};
std::atomic<int64_t> g_read_result{0};
std::atomic<int> g_read_result_times{0};
}  // namespace

void io_test_hooks::set_direct_open_error(int err) { g_direct_open_error.store(err); }
void io_test_hooks::set_short_reads(uint64_t max_bytes) { g_short_reads.store(max_bytes); }
void io_test_hooks::set_read_result(int64_t result, int times) {
  g_read_result.store(result);
  g_read_result_times.store(times);
}

namespace io_detail {

namespace {
// One read(2) moves at most 0x7ffff000 bytes on Linux; keep each under 1 GiB.
constexpr uint64_t kMaxReadBytes = 1ull << 30;
}  // namespace

DriveFiles::DriveFiles(bool direct, std::string root) : direct_(direct), root_(std::move(root)) {}

std::string DriveFiles::note() const {
  std::lock_guard<std::mutex> lock(mu_);
  return note_;
}

int DriveFiles::open(const std::string& path, bool* direct) {
  *direct = false;
  if (direct_.load(std::memory_order_relaxed)) {
    int err = g_direct_open_error.load();
    if (err == 0) {
      const int fd = platform::open_direct(path);
      if (fd >= 0) {
        *direct = true;
        return fd;
      }
      err = -fd;
    }
    if (err != EINVAL) return -err;
    // Direct I/O refused by this file system: buffered from now on, said once.
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (note_.empty())
        note_ = cat("direct I/O refused on ", root_, " (", platform::direct_io_name(), " open of ", path, ": ",
                    std::strerror(EINVAL), "); using buffered reads",
                    platform::can_drop_page_cache() ? " + POSIX_FADV_DONTNEED" : " (the page cache keeps them here)");
    }
    direct_.store(false, std::memory_order_relaxed);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  return fd >= 0 ? fd : -errno;
}

ChunkRead::~ChunkRead() { end(); }

bool ChunkRead::begin(DriveFiles& files, ChunkOutcome* out) {
  int fd = files.open(*job_.path, &direct_);
  if (fd < 0) {
    *out = {false, 0, cat("cannot open: ", std::strerror(-fd))};
    return false;
  }
  fd_ = fd;
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    *out = {false, 0, cat("cannot stat: ", std::strerror(errno))};
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) != job_.file_bytes) {
    *out = {false, 0, cat("file is ", st.st_size, " bytes, expected ", job_.file_bytes)};
    return false;
  }
  return true;
}

uint64_t ChunkRead::next_len() const {
  if (done_ >= job_.len) return 0;
  // Direct reads ask for the rounded length: at the end of the file the
  // kernel returns the short count into the rounded buffer.
  const uint64_t total = direct_ ? round_up_direct(job_.len) : job_.len;
  return std::min(total - done_, kMaxReadBytes);
}

namespace {
// A read's result as the test hooks make it (io/test_hooks.h); res itself
// when they are off, which costs two relaxed loads per read.
int64_t faulted_result(uint8_t* dst, int64_t res) {
  if (g_read_result_times.load(std::memory_order_relaxed) > 0 && g_read_result_times.fetch_sub(1) > 0)
    return g_read_result.load();
  const uint64_t cap = g_short_reads.load(std::memory_order_relaxed);
  if (cap > 0 && res > static_cast<int64_t>(cap)) {
    std::memset(dst + cap, 0xEE, static_cast<size_t>(res) - cap);  // never arrived
    return static_cast<int64_t>(cap);
  }
  return res;
}
}  // namespace

bool ChunkRead::advance(int64_t res, ChunkOutcome* out) {
  res = faulted_result(next_dst(), res);
  if (res < 0) {
    const int err = static_cast<int>(-res);
    if (err == EINTR || err == EAGAIN) return false;  // issue the same read again
    *out = {false, done_, cat("read at offset ", next_offset(), " failed: ", std::strerror(err))};
    return true;
  }
  if (res == 0) {
    *out = {false, done_,
            cat("short read: got ", done_, " of ", job_.len, " bytes at offset ", job_.offset, " (file ended)")};
    return true;
  }
  done_ += static_cast<uint64_t>(res);
  if (done_ > job_.len) {
    *out = {false, job_.len,
            cat("file holds more than the expected ", job_.file_bytes, " bytes (it changed while being read)")};
    return true;
  }
  if (done_ == job_.len) {
    *out = {true, done_, {}};
    return true;
  }
  if (direct_ && done_ % kDirectAlign != 0) {
    *out = {false, done_, cat("short read: got ", done_, " of ", job_.len, " bytes at offset ", job_.offset)};
    return true;
  }
  return false;
}

void ChunkRead::end() {
  if (fd_ < 0) return;
  if (!direct_ && done_ > 0) platform::drop_page_cache(fd_, job_.offset, done_);
  ::close(fd_);
  fd_ = -1;
}

ChunkOutcome run_chunk_sync(DriveFiles& files, const ChunkJob& job) {
  ChunkRead read(job);
  ChunkOutcome out;
  if (!read.begin(files, &out)) return out;
  if (read.next_len() == 0) return {true, 0, {}};  // a zero-byte record
  for (;;) {
    ssize_t r = ::pread(read.fd(), read.next_dst(), read.next_len(), static_cast<off_t>(read.next_offset()));
    if (read.advance(r < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(r), &out)) break;
  }
  read.end();
  return out;
}

}  // namespace io_detail
}  // namespace deltafin
