#include "backend/select/make_backend.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "backend/cpu_backend.h"
#include "util/error.h"
#include "util/progress.h"

#if DELTAFIN_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_contract.h"
#endif

namespace deltafin {

void check_backend_kind(const std::string& kind) {
  if (kind != "cpu" && kind != "vulkan") fail("backend \"", kind, "\": expected cpu or vulkan");
}

// Read when the command line is set up, outside any error handler: the
// value is checked by make_backend, whose error names the variable.
BackendChoice backend_choice_from_env() {
  BackendChoice c;
  if (const char* b = std::getenv("DELTAFIN_BACKEND"); b && *b) c.kind = b, c.kind_from_env = true;
  if (const char* d = std::getenv("DELTAFIN_DEVICE"); d) c.device = d;
  return c;
}

bool vulkan_backend_built() { return DELTAFIN_HAVE_VULKAN != 0; }

std::unique_ptr<Backend> make_backend(const BackendChoice& choice, ThreadPool* pool) {
  if (choice.kind_from_env && choice.kind != "cpu" && choice.kind != "vulkan")
    fail("DELTAFIN_BACKEND=", choice.kind, ": expected cpu or vulkan");
  check_backend_kind(choice.kind);
  if (choice.kind == "cpu") return std::make_unique<CpuBackend>(pool);
#if DELTAFIN_HAVE_VULKAN
  if (choice.device_memory_gb < 0) fail("--device-memory ", choice.device_memory_gb, ": expected GB >= 0");
  const VulkanDeviceInfo device = choose_vulkan_device(choice.device);
  return std::make_unique<VulkanBackend>(device, static_cast<uint64_t>(choice.device_memory_gb * 1e9), pool);
#else
  fail("--backend vulkan: this deltafin was built without its Vulkan backend (the build found no Vulkan headers or "
       "glslc: install libvulkan-dev and glslc, then rebuild)");
#endif
}

std::string backend_description(const Backend& backend) {
#if DELTAFIN_HAVE_VULKAN
  if (const auto* v = dynamic_cast<const VulkanBackend*>(&backend))
    return "vulkan on device " + std::to_string(v->device_info().index) + ", " + v->device_info().name + " (" +
           v->device_info().driver_name + "; fma " + (v->native_fma() ? "the device's" : "formed from doubles") + ")";
#endif
  (void)backend;
  return "";
}

std::string backend_placement(const Backend& backend) {
#if DELTAFIN_HAVE_VULKAN
  if (const auto* v = dynamic_cast<const VulkanBackend*>(&backend)) {
    const VulkanStats s = v->stats();
    const auto gb = [](uint64_t b) { return human_bytes(static_cast<double>(b)); };
    return "vulkan: spine on the device " + gb(s.spine_bytes_on_device) + "; staged from RAM per use: weights " +
           gb(s.weight_bytes_staged) + " (routed experts, and spine past --device-memory), session state " +
           gb(s.state_bytes_staged) + "; device expert tier " + std::to_string(s.tier_hits) + " hits of " +
           std::to_string(s.tier_hits + s.tier_misses) + " expert tensors used, " + gb(s.tier_bytes) + " held, " +
           std::to_string(s.tier_evictions) + " evicted; " + std::to_string(s.submits) + " submits, " +
           std::to_string(s.dispatches) + " dispatches";
  }
#endif
  (void)backend;
  return "";
}

namespace {

std::string gib(uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return s;
}

}  // namespace

std::string describe_devices_json(bool check) {
  nlohmann::json out = nlohmann::json::array();
#if DELTAFIN_HAVE_VULKAN
  for (const VulkanDeviceInfo& d : vulkan_devices()) {
    nlohmann::json j = {{"index", d.index},
                        {"name", d.name},
                        {"type", d.type},
                        {"driver", d.driver_name},
                        {"driver_info", d.driver_info},
                        {"api", d.api_version},
                        {"device_local_bytes", d.device_local_bytes},
                        {"subgroup_size", d.subgroup_size},
                        {"float64", d.float64},
                        {"denorm_preserve_fp32", d.denorm_preserve32},
                        {"denorm_flush_fp32", d.denorm_flush32},
                        {"rounding_rte_fp32", d.rte32},
                        {"denorm_preserve_fp64", d.denorm_preserve64},
                        {"rounding_rte_fp64", d.rte64},
                        {"usable", d.unusable.empty()}};
    if (!d.unusable.empty()) j["why_unusable"] = d.unusable;
    if (check && d.unusable.empty()) {
      const VulkanContract c = check_vulkan_contract(d);
      j["contract"] = {{"same_bits", c.same_bits},
                       {"subnormals", c.subnormals},
                       {"native_fma", c.native_fma},
                       {"failures", c.failures}};
    }
    out.push_back(std::move(j));
  }
#else
  (void)check;
#endif
  return out.dump(2);
}

std::string describe_devices(bool check) {
#if DELTAFIN_HAVE_VULKAN
  std::string s;
  const auto yes = [](bool b) { return b ? "yes" : "no"; };
  const std::vector<VulkanDeviceInfo> all = vulkan_devices();
  if (all.empty())
    return "no Vulkan device: install a driver (mesa-vulkan-drivers gives lavapipe on the CPU; NVIDIA's driver for "
           "its GPUs)\n";
  for (const VulkanDeviceInfo& d : all) {
    s += std::to_string(d.index) + ": " + d.name + " (" + d.type + ")\n";
    s += "   driver " + d.driver_name + " " + d.driver_info + ", Vulkan " + d.api_version + "\n";
    s += "   device memory " + gib(d.device_local_bytes) + ", subgroup " + std::to_string(d.subgroup_size) + "\n";
    s += "   float64 " + std::string(yes(d.float64)) + "; fp32 subnormals promised kept " + yes(d.denorm_preserve32) +
         ", flushed " + yes(d.denorm_flush32) + "; round-to-nearest-even promised " + yes(d.rte32) + "\n";
    if (!d.unusable.empty()) {
      s += "   cannot run deltafin: " + d.unusable + "\n";
      continue;
    }
    if (check) {
      const VulkanContract c = check_vulkan_contract(d);
      s += "   contract check: " + std::string(c.same_bits ? "the CPU's bits on every op" : "DIFFERENT BITS") +
           "; subnormals " + c.subnormals + "; fma " + (c.native_fma ? "fused (the device's)" : "formed from doubles (the device's is not fused)") + "\n";
      for (const std::string& f : c.failures) s += "     " + f + "\n";
    }
  }
  return s;
#else
  (void)check;
  return "this deltafin was built without its Vulkan backend (install libvulkan-dev and glslc, then rebuild)\n";
#endif
}

}  // namespace deltafin
