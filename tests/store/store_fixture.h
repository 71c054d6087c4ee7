// Shared by the store tests: one generated "tiny" K3 checkpoint per test
// binary (generated once, read-only afterwards), drive directories, and a
// quiet setup with fixed drive bandwidths so placement is reproducible.
#pragma once

#include <string>
#include <vector>

#include "model/kimi_k3/checkpoint.h"
#include "store/setup.h"
#include "support/test_support.h"

namespace deltafin::test {

// The tiny checkpoint's directory and its loaded form.
const std::string& tiny_checkpoint_dir();
const K3Checkpoint& tiny_checkpoint();

// Creates n drive directories under root ("root/drive0", ...).
std::vector<std::string> make_drives(const std::string& root, int n);

// Options for a setup of the tiny checkpoint into root/store over `drives`, bf16 spine.
SetupOptions tiny_setup_options(const std::string& root, const std::vector<std::string>& drives);

// A finished bf16 store of the tiny checkpoint over two drives, copied to
// `root` (root/store, root/drive0, root/drive1) with its manifest's drive
// paths rewritten: one setup serves every test that only reads or damages a
// store. Returns the options that would rebuild it there.
SetupOptions copy_of_tiny_store(const std::string& root);

// The whole file's bytes.
std::string read_all(const std::string& path);

// A child process that waits (in pause()) until this object dies, then is
// killed and reaped: a live pid that is not this process's, standing for a
// pid the kernel gave again to an unrelated process after its writer died.
class LiveProcess {
public:
  LiveProcess();
  ~LiveProcess();
  LiveProcess(const LiveProcess&) = delete;
  LiveProcess& operator=(const LiveProcess&) = delete;
  int pid() const { return pid_; }

private:
  int pid_ = -1;
};

}  // namespace deltafin::test
