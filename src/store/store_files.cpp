#include "store/store_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
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

bool is_temp_name(const std::string& name, long long* pid) {
  const size_t at = name.rfind(".tmp-");
  if (at == std::string::npos || at == 0) return false;
  const char* digits = name.c_str() + at + 5;
  const char* end = name.c_str() + name.size();
  if (digits == end) return false;
  long long value = 0;
  const auto [stop, ec] = std::from_chars(digits, end, value);
  if (ec == std::errc::result_out_of_range) {
    if (std::find_if_not(digits, end, [](char c) { return c >= '0' && c <= '9'; }) != end) return false;
    value = -1;
  } else if (ec != std::errc() || stop != end || *digits == '-' || *digits == '+') {
    return false;
  }
  if (pid) *pid = value;
  return true;
}

TempsRemoved remove_temps(const std::string& dir, const std::string& prefix) {
  TempsRemoved removed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    long long pid = 0;
    if (!name.starts_with(prefix) || !is_temp_name(name, &pid) || !e.is_regular_file(ec)) continue;
    if (pid == ::getpid()) continue;  // this process's own write in progress
    const uint64_t bytes = e.file_size(ec);
    if (::unlink(e.path().c_str()) != 0)
      fail(e.path().string(), ": cannot remove a temporary file: ", std::strerror(errno));
    removed += {1, ec ? 0 : bytes};
  }
  return removed;
}

std::vector<TempPlace> store_temp_places(const std::string& store, const std::vector<std::string>& drives) {
  std::vector<TempPlace> places = {{store, ""}, {store + "/spine", ""}, {store + "/remote", ""}};
  for (const std::string& d : drives) {
    places.push_back({d, "deltafin-probe.tmp-"});
    std::error_code ec;
    const std::string tree = d + "/deltafin-experts";
    if (!fs::is_directory(tree, ec)) continue;
    std::vector<std::string> dirs;
    for (const fs::directory_entry& e : fs::directory_iterator(tree, ec))
      if (e.is_directory(ec)) dirs.push_back(e.path().string());
    std::sort(dirs.begin(), dirs.end());
    for (std::string& dir : dirs) places.push_back({std::move(dir), ""});
  }
  return places;
}

int remove_stale_temps(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  int removed = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    long long pid = 0;
    if (!is_temp_name(e.path().filename().string(), &pid) || !e.is_regular_file(ec)) continue;
    // (kill(0) or kill(-1) would ask about groups, and a pid past pid_t's range names none.)
    const bool alive = pid == ::getpid() || (pid > 0 && pid <= std::numeric_limits<pid_t>::max() &&
                                             (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM));
    if (alive) continue;
    if (::unlink(e.path().c_str()) != 0) fail(e.path().string(), ": cannot remove stale temporary file: ", std::strerror(errno));
    ++removed;
  }
  return removed;
}

}  // namespace deltafin
