#include "store/store_fixture.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "model/kimi_k3/generator.h"
#include "store/store_manifest.h"

namespace deltafin::test {

namespace fs = std::filesystem;

const std::string& tiny_checkpoint_dir() {
  static TempDir dir;  // lives for the whole test binary
  static const std::string path = [] {
    GenerateOptions o;
    o.out_dir = dir.file("tiny");
    o.seed = 7;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
    return o.out_dir;
  }();
  return path;
}

const K3Checkpoint& tiny_checkpoint() {
  static const K3Checkpoint k = load_k3_checkpoint(tiny_checkpoint_dir());
  return k;
}

std::vector<std::string> make_drives(const std::string& root, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(root + "/drive" + std::to_string(i));
    fs::create_directories(out.back());
  }
  return out;
}

SetupOptions tiny_setup_options(const std::string& root, const std::vector<std::string>& drives) {
  SetupOptions o;
  o.from = tiny_checkpoint_dir();
  o.store = root + "/store";
  o.drives = drives;
  o.spine = "bf16";
  o.drive_mbps.assign(drives.size(), 2000.0);
  o.quiet = true;
  return o;
}

SetupOptions copy_of_tiny_store(const std::string& root) {
  static TempDir pristine;
  static const bool built = [] {
    run_setup(tiny_setup_options(pristine.path(), make_drives(pristine.path(), 2)));
    return true;
  }();
  (void)built;
  fs::copy(pristine.path(), root, fs::copy_options::recursive);
  const std::string from = fs::canonical(pristine.path()).string(), to = fs::canonical(root).string();
  StoreManifest m = load_store_manifest(root + "/store");
  for (StoreDrive& d : m.drives) d.path = to + d.path.substr(from.size());
  save_store_manifest(root + "/store", m);
  return tiny_setup_options(root, {root + "/drive0", root + "/drive1"});
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

LiveProcess::LiveProcess() {
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    for (;;) ::pause();  // only async-signal-safe calls in the child of a threaded process
  }
}

LiveProcess::~LiveProcess() {
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

}  // namespace deltafin::test
