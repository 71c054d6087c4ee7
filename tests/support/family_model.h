// One generated tiny checkpoint per (family, seed), loaded resident once per
// test binary, for the tests that run the same assertions on every target
// family (parameterised by the registry's family name). Header-only: only
// the test binaries that link the engine include it.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "backend/select/make_backend.h"
#include "model/loaders/family_loaders.h"
#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/presets.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "support/test_support.h"

namespace deltafin::test {

// The target families every parameterised suite runs on.
inline const std::vector<std::string>& target_families() {
  static const std::vector<std::string> f = {"kimi_k3", "qwen3_moe"};
  return f;
}

// Test names by family ("Families/Suite.Test/qwen3_moe").
inline std::string family_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// Writes a tiny checkpoint of `family` into `dir`: K3's tiny preset, or
// Qwen3-MoE's tiny preset (3 layers, the first dense, so both kinds of MLP
// run).
inline void generate_tiny_checkpoint(const std::string& family, const std::string& dir, uint64_t seed) {
  if (family == "kimi_k3") {
    GenerateOptions o;
    o.out_dir = dir;
    o.seed = seed;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
  } else if (family == "qwen3_moe") {
    Qwen3MoeGenerateOptions o;
    o.out_dir = dir;
    o.seed = seed;
    o.dims = qwen3_moe_preset("tiny");
    o.dims.mlp_only_layers = {0};
    generate_qwen3_moe_checkpoint(o);
  } else {
    ADD_FAILURE() << "no tiny checkpoint for family " << family;
  }
}

inline LoadedModel& shared_family_model(const std::string& family, uint64_t seed) {
  struct Slot {
    TempDir dir;
    std::unique_ptr<LoadedModel> m;
  };
  static std::mutex mu;
  static std::map<std::pair<std::string, uint64_t>, std::unique_ptr<Slot>> models;
  std::lock_guard lock(mu);
  auto& slot = models[{family, seed}];
  if (!slot) {
    slot = std::make_unique<Slot>();
    generate_tiny_checkpoint(family, slot->dir.path() + "/ckpt", seed);
    // DELTAFIN_BACKEND=vulkan runs every suite on these models on the Vulkan
    // backend (tests/CMakeLists.txt runs some that way in CI).
    slot->m = load_resident(slot->dir.path() + "/ckpt", 1, backend_choice_from_env());
  }
  return *slot->m;
}

}  // namespace deltafin::test
