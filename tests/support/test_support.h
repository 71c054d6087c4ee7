// Helpers shared by every test binary.
#pragma once

#include <string>

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

// Runs a shell command; returns its exit status and fills *output with
// stdout+stderr.
int run_command(const std::string& command, std::string* output);

}  // namespace deltafin::test
