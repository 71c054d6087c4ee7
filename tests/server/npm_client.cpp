#include "server/npm_client.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "util/file.h"

namespace deltafin::test {

namespace fs = std::filesystem;
using nlohmann::json;

NpmClient install_npm_client(const std::string& dir, const std::string& package, const std::vector<std::string>& scripts) {
  NpmClient c;
  const auto start = std::chrono::steady_clock::now();
  std::string out;
  if (run_command("node --version", &out) != 0) {
    c.why_not = "node is not available: " + out;
    return c;
  }
  const std::string source = source_dir() + "/tests/server/" + dir;
  const std::string package_json = read_text_file(source + "/package.json");
  c.version = json::parse(package_json)["dependencies"][package].get<std::string>();

  const std::string prefix = fs::path(deltafin_binary()).parent_path().string() + "/" + dir + "-client";
  fs::create_directories(prefix);
  FileLock lock(prefix + "/.lock");
  const std::string prefix_json = prefix + "/package.json";
  if (installed_npm_version(prefix, package) != c.version || !file_exists(prefix_json) ||
      read_text_file(prefix_json) != package_json) {
    write_file_atomic(prefix_json, package_json);
    const std::string cmd =
        "npm install --prefix " + shell_quote(prefix) + " --no-audit --no-fund --no-package-lock --loglevel=error";
    if (run_command(cmd, &out) != 0) {
      c.why_not = "`" + cmd + "` failed: " + out;
      return c;
    }
    if (installed_npm_version(prefix, package) != c.version) {
      c.why_not = "`" + cmd + "` did not install " + package + " " + c.version;
      return c;
    }
  } else {
    c.reused = true;
  }
  for (const std::string& script : scripts) {
    c.scripts.push_back(prefix + "/" + script);
    write_file_atomic(c.scripts.back(), read_text_file(source + "/" + script));
  }
  c.install_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  c.ok = true;
  return c;
}

}  // namespace deltafin::test
