#include "support/test_support.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/file.h"

namespace deltafin::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/deltafin-test-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string source_dir() { return DELTAFIN_SOURCE_DIR; }
std::string deltafin_binary() { return DELTAFIN_BINARY; }

int run_command(const std::string& command, std::string* output) {
  std::string cmd = command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf{};
  std::string out;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = ::pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string installed_npm_version(const std::string& prefix, const std::string& name) {
  const std::string package_json = prefix + "/node_modules/" + name + "/package.json";
  if (!file_exists(package_json)) return "";
  try {
    return nlohmann::json::parse(read_text_file(package_json)).value("version", "");
  } catch (const std::exception&) {
    return "";
  }
}

std::string expect_error(const std::function<void()>& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "message lacks \"" << n << "\":\n  " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected deltafin::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected an error containing \"" << (needles.size() ? *needles.begin() : "") << "\"";
  return "";
}

std::vector<uint32_t> random_tokens(uint64_t seed, size_t n, uint32_t vocab) {
  std::vector<uint32_t> t;
  uint64_t x = seed * 7919 + 17;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.push_back(static_cast<uint32_t>((x >> 33) % vocab));
  }
  return t;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

FileLock::FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
  if (fd_ >= 0) ::flock(fd_, LOCK_EX);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace deltafin::test
