// open_direct, drop_page_cache and sync_data on a regular file in a temp
// directory. Whether direct I/O is granted depends on the file system under
// $TMPDIR (ext4 grants it; tmpfs before Linux 6.6 refused it): a refusal must
// be the documented one, and then the direct half is skipped (a failure under
// CI, whose machines must grant it: support/test_support.h).
#include "platform/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/test_support.h"

namespace deltafin::platform {
namespace {

constexpr size_t kBlock = 4096;

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 23);
  return s;
}

TEST(OpenDirect, GivesADirectDescriptorOrTheDocumentedRefusal) {
  test::TempDir dir;
  const std::string path = dir.file("f.bin"), bytes = pattern(4 * kBlock);
  test::write_bytes(path, bytes);
  const int fd = open_direct(path);
  if (fd == -EINVAL) {
    // Refused here: the caller's buffered fallback is a plain open, which works.
    const int plain = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(plain, 0);
    EXPECT_EQ(drop_page_cache(plain, 0, 0), can_drop_page_cache() ? 0 : ENOTSUP);
    ::close(plain);
    REQUIRE_CAPABILITY("O_DIRECT", false,
                       std::string(direct_io_name()) + " refused under " + dir.path() + " (the documented -EINVAL)");
  }
  ASSERT_GE(fd, 0) << "open_direct: " << std::strerror(-fd);
  const int fd_fl = ::fcntl(fd, F_GETFD);
  EXPECT_TRUE(fd_fl >= 0 && (fd_fl & FD_CLOEXEC));
#if defined(O_DIRECT)
  EXPECT_TRUE(::fcntl(fd, F_GETFL) & O_DIRECT);
  EXPECT_STREQ(direct_io_name(), "O_DIRECT");
#endif
  // An aligned read into an aligned buffer returns the file's bytes.
  void* p = nullptr;
  ASSERT_EQ(::posix_memalign(&p, kBlock, 2 * kBlock), 0);
  const ssize_t n = ::pread(fd, p, 2 * kBlock, static_cast<off_t>(kBlock));
  EXPECT_EQ(n, static_cast<ssize_t>(2 * kBlock)) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(p, bytes.data() + kBlock, 2 * kBlock), 0);
  std::free(p);
  ::close(fd);
}

TEST(OpenDirect, AMissingFileIsEnoentNotARefusal) {
  test::TempDir dir;
  EXPECT_EQ(open_direct(dir.file("absent")), -ENOENT);
}

TEST(DropPageCache, SucceedsWhereTheSystemHasItAndSaysEnotsupWhereNot) {
  test::TempDir dir;
  const std::string path = dir.file("f.bin");
  test::write_bytes(path, pattern(3 * kBlock));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
#if defined(__linux__)
  EXPECT_TRUE(can_drop_page_cache());
#endif
  const int want = can_drop_page_cache() ? 0 : ENOTSUP;
  EXPECT_EQ(drop_page_cache(fd, 0, 0), want);
  EXPECT_EQ(drop_page_cache(fd, kBlock, kBlock), want);
  ::close(fd);
  // A bad descriptor is an error where the call exists (posix_fadvise: EBADF).
  if (can_drop_page_cache()) {
    EXPECT_EQ(drop_page_cache(-1, 0, 0), EBADF);
  }
}

TEST(SyncData, FlushesAWrittenFileAndFailsOnABadDescriptor) {
  test::TempDir dir;
  const std::string path = dir.file("f.bin");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  EXPECT_EQ(sync_data(fd), 0) << sync_data_name() << ": " << std::strerror(errno);
  ::close(fd);
  errno = 0;
  EXPECT_EQ(sync_data(-1), -1);
  EXPECT_EQ(errno, EBADF);
#if defined(__linux__)
  EXPECT_STREQ(sync_data_name(), "fdatasync");
#endif
}

}  // namespace
}  // namespace deltafin::platform
