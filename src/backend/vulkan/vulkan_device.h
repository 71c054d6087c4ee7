// A Vulkan device as deltafin uses it: the instance, the chosen physical
// device and its queue, buffers with device addresses (the shaders take
// every array as a buffer reference in their push constants, so no
// descriptor sets are needed), the embedded compute pipelines, and one
// command stream that ops are recorded into and that is submitted when the
// host needs a value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/vulkan/vk_api.h"

namespace deltafin {

// What `deltafin devices` lists and the contract checks use.
struct VulkanDeviceInfo {
  size_t index = 0;
  std::string name, type, driver_name, driver_info, api_version;
  uint64_t device_local_bytes = 0;  // the largest device-local heap
  uint32_t subgroup_size = 0;
  bool float64 = false, buffer_device_address = false;
  // VkPhysicalDeviceFloatControlsProperties, fp32 and fp64: what the driver
  // promises about subnormals and rounding.
  bool denorm_preserve32 = false, denorm_flush32 = false, rte32 = false;
  bool denorm_preserve64 = false, rte64 = false;
  // Why the device cannot run deltafin's shaders at all ("" when it can).
  std::string unusable;
};

// Every physical device the loader offers (an error naming the package to
// install when there is no loader; an empty list when no driver is there).
std::vector<VulkanDeviceInfo> vulkan_devices();

// The device a --device value names: "" the first usable one (a discrete GPU
// before an integrated one, a virtual one, then the CPU's), a number its
// index, anything else a case-insensitive part of its name. An error lists
// the devices when none matches, and says how to get one when there is none.
VulkanDeviceInfo choose_vulkan_device(const std::string& spec);

// A buffer with its memory and device address; mapped when host-visible.
struct VkBuf {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceAddress address = 0;
  size_t bytes = 0;
  void* mapped = nullptr;
};

class VulkanDevice {
public:
  explicit VulkanDevice(const VulkanDeviceInfo& which);
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  const VulkanDeviceInfo& info() const { return info_; }
  // Whether the device's own fma() is fused (checked at start): the shaders
  // then use it; otherwise they form the fused result from doubles.
  bool native_fma() const { return native_fma_; }

  // Device-local (host_visible false) or host-visible coherent memory.
  // Returns false, making nothing, when device memory is exhausted.
  bool try_make_buffer(size_t bytes, bool host_visible, VkBuf& out);
  VkBuf make_buffer(size_t bytes, bool host_visible);
  void free_buffer(VkBuf& b);

  // The command stream: recorded ops run in order, each after the last has
  // finished (a full barrier between commands). submit_and_wait() runs what
  // was recorded and returns when it is done.
  VkCommandBuffer commands();
  void dispatch(const char* shader, const void* push, size_t push_bytes, uint32_t x, uint32_t y = 1, uint32_t z = 1);
  void copy(const VkBuf& src, size_t src_offset, const VkBuf& dst, size_t dst_offset, size_t bytes);
  // Several regions in one command (no two may overlap when src is dst).
  void copy_regions(const VkBuf& src, const VkBuf& dst, const std::vector<VkBufferCopy>& regions);
  void submit_and_wait();
  bool recording() const { return recording_; }

private:
  VkPipeline pipeline(const char* shader);
  VkPipeline make_pipeline(const char* shader, bool native_fma);
  bool check_native_fma();
  void barrier();

  VulkanDeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::map<std::string, VkPipeline> pipelines_;
  VkPhysicalDeviceMemoryProperties memory_{};
  bool recording_ = false;
  bool native_fma_ = false;
};

// The push-constant bytes every shader may use (Vulkan guarantees 128).
inline constexpr size_t kPushBytes = 128;

}  // namespace deltafin
