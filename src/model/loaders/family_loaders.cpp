#include "model/loaders/family_loaders.h"

#include "model/deepseek_v3/load/loaded_deepseek_v3.h"
#include "model/kimi_k3/load/loaded_k3.h"
#include "model/qwen3_moe/load/loaded_qwen3_moe.h"
#include "model/registry.h"
#include "util/error.h"

namespace deltafin {

std::unique_ptr<LoadedModel> load_resident(const std::string& dir, int threads, const BackendChoice& backend) {
  const FamilyInfo& f = detect_checkpoint_family(dir);
  switch (f.family) {
    case Family::KimiK3: return load_k3_resident(dir, threads, backend);
    case Family::Qwen3Moe: return load_qwen3_moe_resident(dir, threads, backend);
    case Family::DeepseekV3: return load_deepseek_v3_resident(dir, threads, backend);
    default: fail(dir, ": a ", f.what, " checkpoint is a draft model, not a target (--draft model:DIR or dspark:DIR)");
  }
}

std::unique_ptr<LoadedModel> load_model(const ModelSource& s) {
  if (s.checkpoint.empty() == s.store.empty()) fail("give exactly one of --model (checkpoint) or --store (deltafin store)");
  std::unique_ptr<LoadedModel> m =
      s.checkpoint.empty() ? load_store(s.store, s.options) : load_resident(s.checkpoint, s.options.threads, s.options.backend);
  if (!s.options.route_trace.empty()) m->open_route_trace(s.options.route_trace);
  return m;
}

std::unique_ptr<LoadedModel> load_store(const std::string& store_dir, const EngineOptions& o) {
  const std::string family = load_store_manifest(store_dir).family;
  if (family == family_info(Family::KimiK3).name) return load_k3_store(store_dir, o);
  if (family == family_info(Family::Qwen3Moe).name) return load_qwen3_moe_store(store_dir, o);
  if (family == family_info(Family::DeepseekV3).name) return load_deepseek_v3_store(store_dir, o);
  fail(store_dir, "/store.json: family \"", family, "\" is not one this build runs");
}

}  // namespace deltafin
