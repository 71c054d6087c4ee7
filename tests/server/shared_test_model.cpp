#include "server/shared_test_model.h"

#include <map>
#include <memory>
#include <mutex>

#include "model/kimi_k3/generator.h"
#include "support/test_support.h"

namespace deltafin::test {

namespace {

struct SharedModel {
  TempDir dir;
  std::unique_ptr<LoadedK3> m;
  explicit SharedModel(uint64_t seed) {
    GenerateOptions o;
    o.out_dir = dir.path();
    o.seed = seed;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
    m = load_k3_resident(dir.path(), 1);
  }
};

}  // namespace

LoadedK3& shared_tiny_model(uint64_t seed) {
  static std::mutex mu;
  static std::map<uint64_t, std::unique_ptr<SharedModel>> models;
  std::lock_guard lock(mu);
  auto& slot = models[seed];
  if (!slot) slot = std::make_unique<SharedModel>(seed);
  return *slot->m;
}

}  // namespace deltafin::test
