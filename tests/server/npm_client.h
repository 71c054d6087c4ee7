// An npm package the server tests drive deltafin with (the official openai
// and @anthropic-ai/sdk clients), installed into <build dir>/<prefix> from
// the tests/server/<dir>/package.json that pins its version, and reused
// while that version is there; an flock keeps parallel test processes from
// installing at the same time. The test scripts are copied next to
// node_modules so that their imports resolve.
#pragma once

#include <string>
#include <vector>

namespace deltafin::test {

struct NpmClient {
  bool ok = false;
  std::string why_not;               // when !ok
  std::vector<std::string> scripts;  // the copies, in the order asked for
  std::string version;
  double install_seconds = 0;
  bool reused = false;
};

// dir: tests/server/<dir> holds package.json and the scripts; package: the
// dependency to check for; scripts: file names in that folder.
NpmClient install_npm_client(const std::string& dir, const std::string& package, const std::vector<std::string>& scripts);

// Under CI (support/test_support.h: under_ci) a client that cannot be
// installed fails the test there; elsewhere it skips loudly.

}  // namespace deltafin::test
