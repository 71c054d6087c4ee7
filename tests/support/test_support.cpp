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
#include <sstream>
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

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
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

bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

namespace {

// Why a CI machine has each capability (test_support.h lists them).
std::string ci_reason(const std::string& capability) {
  if (capability == "io_uring")
    return "CI machines build with liburing-dev (scripts/install-deps.sh) on a kernel that permits io_uring "
           "(no seccomp filter refusing it, as Docker's default profile does; kernel.io_uring_disabled 0)";
  if (capability == "O_DIRECT")
    return "CI machines keep $TMPDIR (or /tmp) on a file system that grants O_DIRECT (ext4, xfs; tmpfs only from "
           "Linux 6.6)";
  if (capability == "vulkan")
    return "CI machines install mesa-vulkan-drivers (lavapipe, a Vulkan 1.3 driver on the CPU), libvulkan-dev and "
           "glslc (scripts/install-deps.sh), so the release build has the Vulkan backend and a device to test it on";
  if (capability == "avx2" || capability == "avx512")
    return "this CPU has the path's features, so the x86-64 build must offer the path and the kernel tests run it";
  return "the suite needs it on CI machines";
}

}  // namespace

std::string missing_capability(const std::string& capability, const std::string& why_missing) {
  std::string msg = "\n*** " + capability + " is not available here (" + why_missing + ")\n*** what needs it has NOT been tested";
  if (under_ci()) msg += "\n*** under CI=true this is a failure: " + ci_reason(capability);
  return msg + "\n";
}

bool have_capability(const std::string& capability, bool available, const std::string& why_missing,
                     const char* file, int line) {
  if (available) return true;
  const std::string msg = missing_capability(capability, why_missing);
  if (under_ci()) {
    ADD_FAILURE_AT(file, line) << msg;
  } else {
    std::printf("[ SKIPPED  ] part of this test:%s", msg.c_str());
    std::fflush(stdout);
  }
  return false;
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
