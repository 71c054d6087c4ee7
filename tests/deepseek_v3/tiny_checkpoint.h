// One tiny generated checkpoint per flavour (make-model's tiny preset, seed
// 11), made once per test process and shared read-only by the tests.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "model/deepseek_v3/generator.h"
#include "support/test_support.h"

namespace deltafin::test {

inline const std::string& tiny_checkpoint(DeepseekV3Flavor flavor) {
  static std::map<DeepseekV3Flavor, std::unique_ptr<TempDir>> made;
  std::unique_ptr<TempDir>& dir = made[flavor];
  if (!dir) {
    dir = std::make_unique<TempDir>();
    DeepseekV3GenerateOptions o;
    o.out_dir = dir->path();
    o.seed = 11;
    o.flavor = flavor;
    o.dims = deepseek_v3_preset("tiny", flavor);
    o.progress = false;
    generate_deepseek_v3_checkpoint(o);
  }
  return dir->path();
}

}  // namespace deltafin::test
