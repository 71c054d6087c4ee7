#include "tokenizer/node_oracle.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "support/test_support.h"
#include "util/file.h"

namespace deltafin::test {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

NodeOracle run_node_oracle(const std::string& prefix, const std::vector<std::pair<std::string, std::string>>& packages,
                           const std::string& script_path, const std::string& request_text) {
  NodeOracle o;
  const auto start = std::chrono::steady_clock::now();
  std::string out;
  if (run_command("node --version", &out) != 0) {
    o.why_not = "node is not available: " + out;
    return o;
  }
  fs::create_directories(prefix);
  FileLock lock(prefix + "/.lock");

  std::string specs;
  bool installed = true;
  for (const auto& [name, version] : packages) {
    specs += " " + name + "@" + version;
    installed = installed && installed_npm_version(prefix, name) == version;
  }
  if (!installed) {
    const std::string cmd = "npm install --prefix " + shell_quote(prefix) + " --no-audit --no-fund --loglevel=error" + specs;
    if (run_command(cmd, &out) != 0) {
      o.why_not = "`" + cmd + "` failed: " + out;
      return o;
    }
  }

  const uint64_t key = fnv1a(read_text_file(script_path), fnv1a(request_text + specs));
  char key_hex[17];
  std::snprintf(key_hex, sizeof key_hex, "%016llx", static_cast<unsigned long long>(key));
  o.out_dir = prefix + "/results/" + key_hex;
  if (file_exists(o.out_dir + "/result.json")) {
    o.from_cache = true;
  } else {
    // Results of other requests (an older corpus or script) are stale.
    std::error_code ec;
    fs::remove_all(prefix + "/results", ec);
    const std::string tmp = o.out_dir + ".tmp";
    fs::create_directories(tmp);
    write_file_atomic(tmp + "/request.json", request_text);
    const std::string cmd = "node " + shell_quote(script_path) + " " + shell_quote(prefix) + " " +
                            shell_quote(tmp + "/request.json") + " " + shell_quote(tmp);
    if (run_command(cmd, &out) != 0) {
      fs::remove_all(tmp, ec);
      o.broken = true;
      o.why_not = "the oracle script failed: `" + cmd + "`: " + out;
      return o;
    }
    fs::rename(tmp, o.out_dir);  // complete results appear at once
  }
  o.result = json::parse(read_text_file(o.out_dir + "/result.json"));
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.ok = true;
  return o;
}

}  // namespace deltafin::test
