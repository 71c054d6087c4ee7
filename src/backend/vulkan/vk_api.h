// The Vulkan functions deltafin calls, loaded at run time from the system's
// loader (libvulkan.so.1) rather than linked: the binary then starts on a
// machine without Vulkan, and only --backend vulkan and `deltafin devices`
// need it (they say which package to install when it is missing).
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

namespace deltafin::vk {

#define DELTAFIN_VK_GLOBAL(X) X(vkCreateInstance) X(vkEnumerateInstanceVersion)
#define DELTAFIN_VK_INSTANCE(X)                                                                       \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties2)                \
  X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceMemoryProperties)                              \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
#define DELTAFIN_VK_DEVICE(X)                                                                          \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)           \
  X(vkMapMemory) X(vkUnmapMemory) X(vkGetBufferDeviceAddress) X(vkCreateShaderModule)                  \
  X(vkDestroyShaderModule) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                        \
  X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateCommandPool) X(vkDestroyCommandPool)      \
  X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkResetCommandBuffer)    \
  X(vkCmdBindPipeline) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdPipelineBarrier)                  \
  X(vkCmdCopyBuffer) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)            \
  X(vkResetFences) X(vkDeviceWaitIdle)

#define DELTAFIN_VK_DECLARE(name) extern PFN_##name name;
DELTAFIN_VK_GLOBAL(DELTAFIN_VK_DECLARE)
DELTAFIN_VK_INSTANCE(DELTAFIN_VK_DECLARE)
DELTAFIN_VK_DEVICE(DELTAFIN_VK_DECLARE)
#undef DELTAFIN_VK_DECLARE

// Opens libvulkan.so.1 and loads the global functions, once; an error naming
// the package to install when the loader is not there.
void load_loader();
void load_instance_functions(VkInstance instance);
void load_device_functions(VkDevice device);

// Throws "vulkan: <what>: <result name>" unless r is VK_SUCCESS.
void check(VkResult r, const char* what);
const char* result_name(VkResult r);

}  // namespace deltafin::vk
