// The /proc and cgroup file parsers. Built on every system (they only read
// files) so the tests can run them on made-up files; only Linux calls them.
#include <fstream>
#include <sstream>

#include "platform/memory.h"

namespace deltafin::platform::detail {

namespace {

uint64_t read_u64_file(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (in >> v) return v;
  return 0;
}

}  // namespace

uint64_t kb_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream s(line.substr(key.size() + 1));
      uint64_t kb = 0;
      s >> kb;
      return kb * 1024;
    }
  return 0;
}

uint64_t cgroup_memory_limit(const std::string& proc_cgroup, const std::string& cgroup_root) {
  std::ifstream in(proc_cgroup);
  std::string line;
  uint64_t best = 0;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string file;
    if (controllers.empty()) file = cgroup_root + path + "/memory.max";
    else if (controllers.find("memory") != std::string::npos) file = cgroup_root + "/memory" + path + "/memory.limit_in_bytes";
    else continue;
    const uint64_t lim = read_u64_file(file);  // "max" reads as 0
    if (lim > 0 && (best == 0 || lim < best)) best = lim;
  }
  return best;
}

}  // namespace deltafin::platform::detail
