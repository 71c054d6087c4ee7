// `deltafin serve` (and other commands) as child processes, for the
// black-box server tests: the built binary is started with the arguments a
// user would give, its stdout and stderr go to one pipe this process reads,
// and it is killed when the test ends, however it ends (PR_SET_PDEATHSIG
// too, if the test process dies).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace deltafin::test {

using ChildClock = std::chrono::steady_clock;

class Child {
public:
  // Starts argv[0] (searched on PATH) with the environment plus `extra_env`
  // ("NAME=value"). Throws when fork or pipe fail; an exec failure shows as
  // exit status 127 with the reason in the output.
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Reads what is there (waiting up to `wait`); appends to *out. False at EOF.
  bool read_some(std::string* out, std::chrono::milliseconds wait);
  // Waits for the exit until the deadline; the exit status (128 + signal), or
  // nullopt when it is still running.
  std::optional<int> wait_until(ChildClock::time_point deadline);
  void signal(int sig);
  // SIGTERM, then SIGKILL after `grace`; returns the exit status.
  int kill_and_wait(std::chrono::milliseconds grace);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = -1;
};

// Runs a command to completion (killed at the deadline); its status and output.
int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string* output,
              std::chrono::seconds limit);

// `deltafin serve --port 0 ARGS...` with its output collected by a thread
// (the server logs every request on stderr, so the pipe must keep being
// read). error() is non-empty when it did not come up.
class ServeProcess {
public:
  ServeProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
               std::chrono::seconds start_limit = std::chrono::seconds(60));
  ~ServeProcess() { stop(); }

  // SIGTERM and wait (SIGKILL after `grace`); the exit status.
  int stop(std::chrono::seconds grace = std::chrono::seconds(30));
  void signal(int sig) { child_.signal(sig); }
  std::optional<int> wait_until(ChildClock::time_point deadline) { return child_.wait_until(deadline); }

  const std::string& error() const { return error_; }
  const std::string& base_url() const { return base_url_; }
  int port() const { return port_; }
  pid_t pid() const { return child_.pid(); }
  std::string output();
  // Waits until the output contains `needle` (true) or `limit` passes.
  bool wait_for_output(const std::string& needle, std::chrono::milliseconds limit);

private:
  Child child_;
  std::string base_url_, error_;
  int port_ = 0;
  std::mutex mu_;
  std::string output_;
  std::thread drain_;
  bool stopped_ = false;
  int status_ = -1;
};

// VmRSS of a process, bytes (0 when unreadable).
uint64_t rss_bytes(pid_t pid);

// A tiny K3 checkpoint made by `deltafin make-model --preset tiny --seed SEED`
// in a temporary directory, once per seed and test process.
const std::string& tiny_checkpoint_dir(int seed);

}  // namespace deltafin::test
