// The expert reader's two machine capabilities, for the tests that claim to
// exercise them (support/test_support.h: REQUIRE_CAPABILITY, have_capability):
// io_uring as a reader gets it here, and direct I/O where the tests put their
// drives ($TMPDIR or /tmp). Both are probed the way the reader meets them, so
// a test hook that refuses them (io/test_hooks.h) is seen too.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "io/expert_reader.h"
#include "platform/files.h"
#include "support/test_support.h"

namespace deltafin::test {

// Whether a reader asked for io_uring runs on it here; *why: the reader's
// note (io_uring refused, or a build without liburing) when not.
inline bool io_uring_here(std::string* why) {
  TempDir drive;
  ReaderOptions o;
  o.engine = IoEngine::Uring;
  ExpertReader reader({{drive.path(), 1e9}}, o, nullptr);
  if (reader.engine() == IoEngine::Uring) return true;
  *why = reader.engine_note();
  return false;
}

// Whether a file under $TMPDIR (or /tmp) opens for direct I/O; *why when not.
inline bool direct_io_here(std::string* why) {
  TempDir dir;
  const std::string path = dir.file("probe.bin");
  write_bytes(path, std::string(4096, 'x'));
  const int fd = platform::open_direct(path);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  *why = std::string(platform::direct_io_name()) + " open under " + dir.path() + ": " + std::strerror(-fd);
  return false;
}

// For a loop over engines: whether to run `engine` here. io_uring only where
// a reader gets it; where not, a failure under CI and a loud note elsewhere.
inline bool engine_here(IoEngine engine, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (engine != IoEngine::Uring) return true;
  std::string why;
  const bool ok = io_uring_here(&why);
  return have_capability("io_uring", ok, why, file, line);
}

// What a store's reader on `engine` (and direct I/O, the default) lacks here:
// "" when nothing, else the capability's name with *why set. For
// REQUIRE_CAPABILITY(missing, missing.empty(), why).
inline std::string missing_for_reader(IoEngine engine, std::string* why) {
  if (engine == IoEngine::Uring && !io_uring_here(why)) return "io_uring";
  if (!direct_io_here(why)) return "O_DIRECT";
  return "";
}

// The reader runs on the engine asked for and reads every drive direct.
inline void expect_reader_as_asked(const ExpertReader& reader, IoEngine asked) {
  EXPECT_EQ(reader.engine(), asked) << reader.engine_note();
  for (const DriveStatus& d : reader.drive_status()) EXPECT_TRUE(d.direct) << d.path << ": " << d.note;
}

// The io_uring instances this process holds now (each ring is a descriptor
// on the anonymous inode "[io_uring]"), read from /proc/self/fd: a check that
// does not ask the reader which engine it uses. -1 where there is no /proc.
inline int io_uring_rings() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  int rings = 0;
  while (const dirent* e = ::readdir(d)) {
    char target[256];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    rings += std::strcmp(target, "anon_inode:[io_uring]") == 0;
  }
  ::closedir(d);
  return rings;
}

}  // namespace deltafin::test
