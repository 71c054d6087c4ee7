#include "util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "util/error.h"

namespace deltafin {

namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File::File(File&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

File File::open_read(const std::string& path) {
  File f;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) fail(path, ": cannot open: ", errno_text());
  f.path_ = path;
  return f;
}

uint64_t File::size() const {
  struct stat st{};
  if (::fstat(fd_, &st) != 0) fail(path_, ": cannot stat: ", errno_text());
  return static_cast<uint64_t>(st.st_size);
}

void File::pread_exact(void* dst, size_t n, uint64_t offset) const {
  auto* p = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(path_, ": read of ", n, " bytes at offset ", offset, " failed: ", errno_text());
    if (r == 0) fail(path_, ": short read: wanted ", n, " bytes at offset ", offset, ", file ends after ", done);
    done += static_cast<size_t>(r);
  }
}

AtomicFile::AtomicFile(std::string path, unsigned mode) : path_(std::move(path)) {
  tmp_ = cat(path_, ".tmp-", ::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd_ < 0) fail(tmp_, ": cannot create: ", errno_text());
  // A private file is private from its first byte, even when an older
  // temporary of the same name (a reused pid) had wider permissions.
  if (mode == kPrivateFile && ::fchmod(fd_, static_cast<mode_t>(mode)) != 0) {
    const std::string why = errno_text();
    ::close(fd_);
    ::unlink(tmp_.c_str());
    fd_ = -1;
    fail(tmp_, ": cannot make it private (0600): ", why);
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd_, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(tmp_, ": write failed: ", errno_text());
    done += static_cast<size_t>(w);
  }
  written_ += n;
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail(tmp_, ": fsync failed: ", errno_text());
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail(tmp_, ": close failed: ", errno_text());
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp_.c_str());
    fail("cannot rename ", tmp_, " to ", path_, ": ", why);
  }
  // Make the rename itself durable.
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string read_text_file(const std::string& path) {
  File f = File::open_read(path);
  std::string s(f.size(), '\0');
  f.pread_exact(s.data(), s.size(), 0);
  return s;
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  AtomicFile f(path);
  f.write(contents.data(), contents.size());
  f.commit();
}

bool file_exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace deltafin
