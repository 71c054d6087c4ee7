#include "backend/vulkan/vk_api.h"

#include <dlfcn.h>

#include <mutex>

#include "util/error.h"

namespace deltafin::vk {

#define DELTAFIN_VK_DEFINE(name) PFN_##name name = nullptr;
DELTAFIN_VK_GLOBAL(DELTAFIN_VK_DEFINE)
DELTAFIN_VK_INSTANCE(DELTAFIN_VK_DEFINE)
DELTAFIN_VK_DEVICE(DELTAFIN_VK_DEFINE)
#undef DELTAFIN_VK_DEFINE

namespace {
PFN_vkGetInstanceProcAddr get_instance_proc = nullptr;
}

void load_loader() {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = std::string("the Vulkan loader libvulkan.so.1 is not installed (") + dlerror() +
              "): install Debian's libvulkan1 and a driver (mesa-vulkan-drivers for AMD, Intel and the "
              "CPU's lavapipe; NVIDIA's driver for NVIDIA GPUs)";
      return;
    }
    get_instance_proc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (!get_instance_proc) {
      error = "libvulkan.so.1 has no vkGetInstanceProcAddr";
      return;
    }
#define DELTAFIN_VK_LOAD(name) name = reinterpret_cast<PFN_##name>(get_instance_proc(nullptr, #name));
    DELTAFIN_VK_GLOBAL(DELTAFIN_VK_LOAD)
#undef DELTAFIN_VK_LOAD
  });
  if (!error.empty()) fail("vulkan: ", error);
}

void load_instance_functions(VkInstance instance) {
#define DELTAFIN_VK_LOAD(name)                                                        \
  name = reinterpret_cast<PFN_##name>(get_instance_proc(instance, #name));            \
  if (!name) fail("vulkan: the loader has no ", #name);
  DELTAFIN_VK_INSTANCE(DELTAFIN_VK_LOAD)
#undef DELTAFIN_VK_LOAD
}

void load_device_functions(VkDevice device) {
#define DELTAFIN_VK_LOAD(name)                                                        \
  name = reinterpret_cast<PFN_##name>(vkGetDeviceProcAddr(device, #name));            \
  if (!name) fail("vulkan: the device has no ", #name);
  DELTAFIN_VK_DEVICE(DELTAFIN_VK_LOAD)
#undef DELTAFIN_VK_LOAD
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    default: return "a VkResult error";
  }
}

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) fail("vulkan: ", what, ": ", result_name(r), " (", static_cast<int>(r), ")");
}

}  // namespace deltafin::vk
