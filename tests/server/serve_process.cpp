#include "server/serve_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <stdexcept>

#include "support/test_support.h"

extern char** environ;

namespace deltafin::test {

using Clock = ChildClock;

Child::Child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    bool overridden = false;
    for (const std::string& x : extra_env)
      overridden |= entry.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    if (!overridden) env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // Only async-signal-safe calls from here on.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the test died before prctl
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execvpe(args[0], args.data(), envp.data());
    const char* msg = "exec failed: ";
    (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
    (void)!::write(STDERR_FILENO, args[0], std::strlen(args[0]));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  ::close(fds[1]);
  fd_ = fds[0];
}

Child::~Child() {
  kill_and_wait(std::chrono::seconds(5));
  if (fd_ >= 0) ::close(fd_);
}

bool Child::read_some(std::string* out, std::chrono::milliseconds wait) {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return true;
  char buf[4096];
  const ssize_t n = ::read(fd_, buf, sizeof buf);
  if (n > 0) {
    out->append(buf, static_cast<size_t>(n));
    return true;
  }
  if (n < 0 && errno == EINTR) return true;
  return false;
}

std::optional<int> Child::wait_until(Clock::time_point deadline) {
  while (pid_ > 0) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      status_ = -1;
      break;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

void Child::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

int Child::kill_and_wait(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return status_;
  signal(SIGTERM);
  if (auto s = wait_until(Clock::now() + grace)) return *s;
  signal(SIGKILL);
  return *wait_until(Clock::time_point::max());
}

int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string* output,
              std::chrono::seconds limit) {
  Child c(argv, env);
  const auto deadline = Clock::now() + limit;
  while (c.read_some(output, std::chrono::milliseconds(200))) {
    if (Clock::now() >= deadline) {
      *output += "\n[killed: ran past " + std::to_string(limit.count()) + " s]\n";
      return c.kill_and_wait(std::chrono::seconds(2));
    }
  }
  return c.kill_and_wait(std::chrono::seconds(10));  // at EOF it has exited or is exiting
}

namespace {

std::vector<std::string> serve_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv{deltafin_binary(), "serve", "--port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

ServeProcess::ServeProcess(const std::vector<std::string>& args, const std::vector<std::string>& env,
                           std::chrono::seconds start_limit)
    : child_(serve_argv(args), env) {
  static const std::regex listening(R"(serve: listening on (http://127\.0\.0\.1:(\d+)))");
  const auto deadline = Clock::now() + start_limit;
  std::string out;
  std::smatch m;
  while (true) {
    if (std::regex_search(out, m, listening)) {
      base_url_ = m[1];
      port_ = std::stoi(m[2]);
      break;
    }
    if (Clock::now() >= deadline) {
      error_ = "the server did not say it was listening within " + std::to_string(start_limit.count()) + " s";
      break;
    }
    if (!child_.read_some(&out, std::chrono::milliseconds(200))) {
      error_ = "the server exited before listening";
      break;
    }
  }
  output_ = out;
  if (error_.empty()) drain_ = std::thread([this] {
      std::string chunk;
      while (child_.read_some(&chunk, std::chrono::milliseconds(100))) {
        if (chunk.empty()) continue;
        std::lock_guard lock(mu_);
        output_ += chunk;
        chunk.clear();
      }
    });
}

int ServeProcess::stop(std::chrono::seconds grace) {
  if (!stopped_) {
    stopped_ = true;
    status_ = child_.kill_and_wait(grace);
    if (drain_.joinable()) drain_.join();
  }
  return status_;
}

std::string ServeProcess::output() {
  std::lock_guard lock(mu_);
  return output_;
}

bool ServeProcess::wait_for_output(const std::string& needle, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (output().find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return output().find(needle) != std::string::npos;
}

const std::string& tiny_checkpoint_dir(int seed) {
  static std::mutex mu;
  static std::map<int, std::pair<std::unique_ptr<TempDir>, std::string>> made;
  std::lock_guard lock(mu);
  auto& [dir, path] = made[seed];
  if (!dir) {
    dir = std::make_unique<TempDir>();
    path = dir->file("tiny");
    std::string out;
    if (run_command(shell_quote(deltafin_binary()) + " make-model --preset tiny --seed " + std::to_string(seed) +
                        " --out " + shell_quote(path) + " --quiet",
                    &out) != 0)
      throw std::runtime_error("make-model failed: " + out);
  }
  return path;
}

uint64_t rss_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace deltafin::test
