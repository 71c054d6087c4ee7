#include "store/store_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "platform/files.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace fs = std::filesystem;

Sha256Digest hash_file(const std::string& path, bool drop_cache, uint32_t* crc) {
  std::vector<uint32_t> crcs;
  const Sha256Digest d = hash_files({path}, drop_cache, crc ? &crcs : nullptr);
  if (crc) *crc = crcs[0];
  return d;
}

Sha256Digest hash_files(const std::vector<std::string>& paths, bool drop_cache, std::vector<uint32_t>* crcs) {
  Sha256 h;
  std::vector<uint8_t> buf;
  if (crcs) crcs->clear();
  for (const std::string& path : paths) {
    File f = File::open_read(path);
    if (drop_cache) platform::drop_page_cache(f.fd(), 0, 0);
    const uint64_t size = f.size();
    uint32_t c = 0;
    buf.resize(std::max<size_t>(buf.size(), static_cast<size_t>(std::min<uint64_t>(size, 8u << 20))));
    for (uint64_t off = 0; off < size; off += buf.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
      f.pread_exact(buf.data(), n, off);
      h.update(buf.data(), n);
      if (crcs) c = crc32c(buf.data(), n, c);
    }
    if (crcs) crcs->push_back(c);
  }
  return h.finish();
}

uint64_t free_bytes(const std::string& path) {
  struct statvfs s{};
  if (::statvfs(path.c_str(), &s) != 0) fail(path, ": cannot query free space: ", std::strerror(errno));
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

uint64_t device_of(const std::string& path) {
  struct stat s{};
  if (::stat(path.c_str(), &s) != 0) fail(path, ": cannot stat: ", std::strerror(errno));
  return static_cast<uint64_t>(s.st_dev);
}

int remove_stale_temps(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  int removed = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos || !e.is_regular_file(ec)) continue;
    const std::string pid_text = name.substr(at + 5);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(pid_text);
    if (pid == ::getpid() || (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) continue;  // writer alive
    if (::unlink(e.path().c_str()) != 0) fail(e.path().string(), ": cannot remove stale temporary file: ", std::strerror(errno));
    ++removed;
  }
  return removed;
}

}  // namespace deltafin
