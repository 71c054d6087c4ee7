// Plain POSIX file access with errors that name the path, and the one way this
// project writes files: AtomicFile (temporary name, fsync, rename, fsync dir),
// so a crash or Ctrl-C never leaves a half-written file under the final name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace deltafin {

class File {
public:
  File() = default;
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  static File open_read(const std::string& path);

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  uint64_t size() const;
  // Reads exactly n bytes at offset or throws (naming the path and range).
  void pread_exact(void* dst, size_t n, uint64_t offset) const;

private:
  int fd_ = -1;
  std::string path_;
};

// Writes to "<path>.tmp-<pid>"; commit() fsyncs, renames onto path and fsyncs
// the directory. Destroyed without commit(): the temporary file is removed.
// kPrivateFile: readable and writable by this user only, whatever the umask
// (files holding a user's text: prompt states); otherwise 0644 less the umask.
inline constexpr unsigned kPrivateFile = 0600;
class AtomicFile {
public:
  explicit AtomicFile(std::string path, unsigned mode = 0644);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  uint64_t written() const { return written_; }
  void commit();
  const std::string& path() const { return path_; }

private:
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

std::string read_text_file(const std::string& path);
void write_file_atomic(const std::string& path, const std::string& contents);
bool file_exists(const std::string& path);

}  // namespace deltafin
