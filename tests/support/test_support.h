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
std::string source_dir();     // the repository root
std::string deltafin_binary();  // the built deltafin executable

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

// Runs fn, expects a deltafin::Error whose message contains every needle;
// returns the message (empty when no error or the wrong type was thrown).
std::string expect_error(const std::function<void()>& fn, std::initializer_list<std::string> needles);

}  // namespace deltafin::test

// EXPECT_FAILS_WITH(statement, "needle", ...): the statement throws a
// deltafin::Error naming every needle; failures point at the caller's line.
#define EXPECT_FAILS_WITH(stmt, ...)                                        \
  do {                                                                      \
    SCOPED_TRACE(#stmt);                                                    \
    ::deltafin::test::expect_error([&]() { stmt; }, {__VA_ARGS__});          \
  } while (0)
