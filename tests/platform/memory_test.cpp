// The memory figures: plausible on this machine (non-zero, within the
// physical RAM, the resident set following memory this test touches), and
// the Linux parsers on made-up /proc and cgroup files (v1, v2, "max", both).
#include "platform/memory.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "support/test_support.h"

namespace deltafin::platform {
namespace {

uint64_t physical_ram() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
}

#if defined(__linux__) || defined(__APPLE__)
TEST(Memory, AvailableIsNonZeroAndWithinThePhysicalRam) {
  const uint64_t avail = available_memory_bytes();
  EXPECT_GT(avail, 0u);
  EXPECT_LE(avail, physical_ram());
}

TEST(Memory, ResidentSetFollowsTouchedMemory) {
  const uint64_t before = current_rss_bytes();
  EXPECT_GT(before, 0u);
  // 64 MiB written page by page: resident until freed, whatever else runs.
  constexpr size_t kBytes = 64u << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  volatile char* touch = block.get();  // volatile: the stores must happen
  for (size_t i = 0; i < kBytes; i += 4096) touch[i] = static_cast<char>(i);
  const uint64_t during = current_rss_bytes(), peak = peak_rss_bytes();
  EXPECT_GE(during, before + kBytes / 2) << "before " << before << ", during " << during;
  EXPECT_GE(peak, during);
  EXPECT_LE(peak, physical_ram());
}
#endif

#if !defined(__APPLE__)
TEST(Memory, TheCgroupLimitIsNoneOrAPlausibleFigure) {
  // Whatever this machine's cgroup says: none (0), or at least a page.
  const uint64_t lim = memory_limit_bytes();
  if (lim > 0) {
    EXPECT_GE(lim, 4096u);
  }
}
#endif

class ProcFiles : public ::testing::Test {
protected:
  std::string put(const std::string& rel, const std::string& text) {
    const std::string path = dir_.path() + "/" + rel;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    test::write_bytes(path, text);
    return path;
  }
  std::string root() const { return dir_.path() + "/sys/fs/cgroup"; }
  test::TempDir dir_;
};

TEST_F(ProcFiles, KbFieldReadsTheNamedLineInBytes) {
  const std::string f = put("meminfo", "MemTotal:       16318412 kB\nMemFree:  100 kB\nMemAvailable:   12000 kB\n");
  EXPECT_EQ(detail::kb_field(f, "MemAvailable"), 12000u * 1024);
  EXPECT_EQ(detail::kb_field(f, "MemFree"), 100u * 1024);
  EXPECT_EQ(detail::kb_field(f, "Mem"), 0u);  // a prefix of a key is not the key
  EXPECT_EQ(detail::kb_field(f, "SwapTotal"), 0u);
  EXPECT_EQ(detail::kb_field(dir_.file("absent"), "MemAvailable"), 0u);
}

TEST_F(ProcFiles, CgroupV2LimitAndMax) {
  const std::string cg = put("cgroup", "0::/user.slice/job\n");
  put("sys/fs/cgroup/user.slice/job/memory.max", "8589934592\n");
  EXPECT_EQ(detail::cgroup_memory_limit(cg, root()), 8589934592u);
  put("sys/fs/cgroup/user.slice/job/memory.max", "max\n");
  EXPECT_EQ(detail::cgroup_memory_limit(cg, root()), 0u);
}

TEST_F(ProcFiles, CgroupV1MemoryControllerAndOthersIgnored) {
  const std::string cg = put("cgroup", "12:cpu,cpuacct:/docker/x\n5:memory:/docker/x\n1:name=systemd:/docker/x\n");
  put("sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes", "1073741824\n");
  put("sys/fs/cgroup/cpu,cpuacct/docker/x/memory.max", "1\n");  // not a memory controller: never read
  EXPECT_EQ(detail::cgroup_memory_limit(cg, root()), 1073741824u);
}

TEST_F(ProcFiles, TheLowestLimitWinsAndNoFileMeansNoLimit) {
  const std::string cg = put("cgroup", "0::/a\n5:memory:/b\n");
  put("sys/fs/cgroup/a/memory.max", "3000000000\n");
  put("sys/fs/cgroup/memory/b/memory.limit_in_bytes", "2000000000\n");
  EXPECT_EQ(detail::cgroup_memory_limit(cg, root()), 2000000000u);
  EXPECT_EQ(detail::cgroup_memory_limit(dir_.file("absent"), root()), 0u);
  const std::string lone = put("cgroup2", "0::/nowhere\n");
  EXPECT_EQ(detail::cgroup_memory_limit(lone, root()), 0u);
}

}  // namespace
}  // namespace deltafin::platform
