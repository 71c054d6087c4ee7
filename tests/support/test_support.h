// Helpers shared by every test binary.
#pragma once

#include <functional>
#include <initializer_list>
#include <cstdint>
#include <string>
#include <vector>

namespace deltafin::test {

// A fresh empty directory under $TMPDIR (or /tmp), removed when the object dies.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

void write_bytes(const std::string& path, const std::string& bytes);
// A file's bytes ("" when it cannot be read).
std::string read_bytes(const std::string& path);
std::string source_dir();     // the repository root
std::string deltafin_binary();  // the built deltafin executable
// A shell command running the built deltafin with `args`.
inline std::string df(const std::string& args) { return deltafin_binary() + " " + args; }

// n pseudo-random token ids below vocab, the same for the same seed (an LCG).
std::vector<uint32_t> random_tokens(uint64_t seed, size_t n, uint32_t vocab);

// s in single quotes for /bin/sh, inner quotes escaped.
std::string shell_quote(const std::string& s);

// Holds an exclusive flock on a file for its lifetime, so parallel test
// processes (ctest -j) do not install or run the same thing at once.
class FileLock {
public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

private:
  int fd_;
};

// Runs a shell command; returns its exit status and fills *output with
// stdout+stderr.
int run_command(const std::string& command, std::string* output);
// The version of npm package `name` installed under prefix/node_modules ("" when none).
std::string installed_npm_version(const std::string& prefix, const std::string& name);

// CI=true in the environment (.ci/run sets it): this is a CI machine, which
// must have everything the suite needs. Where something is missing a test
// that would otherwise skip fails instead: npm oracles, nginx, and the
// machine capabilities below.
bool under_ci();

// Machine capabilities. A test that needs one the machine lacks cannot prove
// what it claims (a "/uring" case run on the pread pool passes while io_uring
// is never touched), so it must not pass silently: under CI it fails, naming
// the capability, why it is missing and why a CI machine must have it;
// elsewhere it is skipped (or the part needing it is left out) loudly. The
// capabilities a CI machine must have, and why (x86-64 or ARM64 Linux,
// Debian 12 or later, set up by scripts/install-deps.sh):
//   "io_uring"  liburing-dev is installed, so the build has the backend, and
//               the kernel permits io_uring (no seccomp filter refusing it,
//               as Docker's default profile does; kernel.io_uring_disabled 0);
//   "O_DIRECT"  $TMPDIR (or /tmp), where the tests put their drives, is on a
//               file system that grants O_DIRECT (ext4, xfs; tmpfs only from
//               Linux 6.6);
//   "vulkan"    the build has the Vulkan backend (libvulkan-dev, glslc) and
//               the loader finds a device (mesa-vulkan-drivers: lavapipe);
//   "avx2", "avx512"  only where the CPU has the path's features (the kernel
//               lists them in /proc/cpuinfo): then the x86-64 build must offer
//               the path and the kernel tests run it. A CPU without them is not
//               a missing capability: that path is skipped, with a note.
// The message for a missing capability (why_missing: what the machine said).
std::string missing_capability(const std::string& capability, const std::string& why_missing);
// For a part of a test (one engine of a loop over engines): true when
// `available`; otherwise a failure under CI (ADD_FAILURE) or a loud note
// elsewhere, and false: the caller leaves that part out.
// The failure points at the caller's line (__builtin_FILE/LINE in a default
// argument take the call's place, as std::source_location would; clang 14,
// which the sanitizer build uses, has no std::source_location yet).
bool have_capability(const std::string& capability, bool available, const std::string& why_missing,
                     const char* file = __builtin_FILE(), int line = __builtin_LINE());

// Runs fn, expects a deltafin::Error whose message contains every needle;
// returns the message (empty when no error or the wrong type was thrown).
std::string expect_error(const std::function<void()>& fn, std::initializer_list<std::string> needles);

}  // namespace deltafin::test

// REQUIRE_CAPABILITY("io_uring", available, why_missing): the rest of the
// test needs the capability; without it the test fails under CI and is
// skipped loudly elsewhere (see missing_capability). In a test body or SetUp.
#define REQUIRE_CAPABILITY(capability, available, why_missing)                                  \
  do {                                                                                         \
    if (!(available)) {                                                                        \
      const std::string df_missing_ = ::deltafin::test::missing_capability(capability, why_missing); \
      if (::deltafin::test::under_ci()) FAIL() << df_missing_;                                  \
      GTEST_SKIP() << df_missing_;                                                             \
    }                                                                                          \
  } while (0)

// EXPECT_FAILS_WITH(statement, "needle", ...): the statement throws a
// deltafin::Error naming every needle; failures point at the caller's line.
#define EXPECT_FAILS_WITH(stmt, ...)                                        \
  do {                                                                      \
    SCOPED_TRACE(#stmt);                                                    \
    ::deltafin::test::expect_error([&]() { stmt; }, {__VA_ARGS__});          \
  } while (0)
