#include "store/drive_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "platform/files.h"
#include "util/error.h"
#include "util/weight_memory.h"

namespace deltafin {

namespace {

constexpr uint64_t kBlock = 4u << 20;
constexpr int kThreads = 4;

// Removes the probe file however the probe ends.
struct Unlinker {
  std::string path;
  ~Unlinker() { ::unlink(path.c_str()); }
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string DriveProbeResult::method() const {
  return direct ? cat("probed with ", platform::direct_io_name())
                : cat("probed with buffered reads (", platform::direct_io_name(), " refused)");
}

DriveProbeResult probe_drive(const std::string& dir, uint64_t file_bytes, double max_seconds) {
  file_bytes = std::max<uint64_t>(kBlock, file_bytes / kBlock * kBlock);
  const std::string path = dir + "/deltafin-probe.tmp-" + std::to_string(::getpid());
  Unlinker cleanup{path};
  DriveProbeResult r;

  {
    // Random-ish bytes: a drive that compresses or dedups zeros would look too fast.
    WeightBuffer buf = alloc_weight_buffer(kBlock, 4096);  // O_DIRECT alignment
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < kBlock; i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      std::memcpy(buf.get() + i, &x, 8);
    }
    Fd w;
    w.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (w.fd < 0) fail(dir, ": cannot write the bandwidth probe file ", path, ": ", std::strerror(errno));
    for (uint64_t off = 0; off < file_bytes; off += kBlock) {
      buf.get()[0] = static_cast<uint8_t>(off >> 22);  // blocks differ
      if (::pwrite(w.fd, buf.get(), kBlock, static_cast<off_t>(off)) != static_cast<ssize_t>(kBlock))
        fail(dir, ": writing the bandwidth probe file ", path, " failed: ", std::strerror(errno));
    }
    if (::fsync(w.fd) != 0) fail(dir, ": fsync of the bandwidth probe file failed: ", std::strerror(errno));
    platform::drop_page_cache(w.fd, 0, 0);  // so a buffered fallback reads the drive
  }

  Fd rd;
  rd.fd = platform::open_direct(path);
  if (rd.fd == -EINVAL) {
    r.direct = false;
    rd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (rd.fd >= 0) platform::drop_page_cache(rd.fd, 0, 0);
    else rd.fd = -errno;
  }
  if (rd.fd < 0) fail(dir, ": cannot read the bandwidth probe file ", path, ": ", std::strerror(-rd.fd));

  const uint64_t blocks = file_bytes / kBlock;
  std::atomic<uint64_t> next{0}, done_bytes{0};
  std::atomic<bool> failed{false};
  int read_errno = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(max_seconds);
  auto reader = [&] {
    WeightBuffer buf = alloc_weight_buffer(kBlock, 4096);  // O_DIRECT alignment
    for (;;) {
      const uint64_t b = next.fetch_add(1);
      if (b >= blocks || failed || std::chrono::steady_clock::now() >= deadline) return;
      ssize_t n = ::pread(rd.fd, buf.get(), kBlock, static_cast<off_t>(b * kBlock));
      if (n != static_cast<ssize_t>(kBlock)) {
        if (!failed.exchange(true)) read_errno = n < 0 ? errno : EIO;
        return;
      }
      done_bytes += kBlock;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(reader);
  for (std::thread& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (failed) fail(dir, ": reading the bandwidth probe file ", path, " failed: ", std::strerror(read_errno));
  r.bytes_read = done_bytes;
  if (r.bytes_read == 0 || r.seconds <= 0) fail(dir, ": the bandwidth probe read nothing");
  r.bytes_per_s = static_cast<double>(r.bytes_read) / r.seconds;
  return r;
}

}  // namespace deltafin
