#include "backend/vulkan/vulkan_device.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <random>

#include "backend/vulkan/shaders.h"
#include "util/error.h"

namespace deltafin {

namespace {

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

int type_rank(const std::string& type) {  // lower: chosen first
  if (type == "discrete GPU") return 0;
  if (type == "integrated GPU") return 1;
  if (type == "virtual GPU") return 2;
  return 3;
}

// One instance per process (Vulkan 1.2: buffer device addresses are core).
VkInstance shared_instance() {
  static std::once_flag once;
  static VkInstance instance = VK_NULL_HANDLE;
  static std::string error;
  vk::load_loader();
  std::call_once(once, [] {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "deltafin";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    const VkResult r = vk::vkCreateInstance(&ci, nullptr, &instance);
    if (r != VK_SUCCESS) {
      error = std::string("creating an instance: ") + vk::result_name(r) +
              " (no Vulkan 1.2 driver is installed: mesa-vulkan-drivers gives the CPU's lavapipe)";
      return;
    }
    vk::load_instance_functions(instance);
  });
  if (!error.empty()) fail("vulkan: ", error);
  return instance;
}

std::vector<VkPhysicalDevice> physical_devices() {
  VkInstance instance = shared_instance();
  uint32_t n = 0;
  vk::check(vk::vkEnumeratePhysicalDevices(instance, &n, nullptr), "listing devices");
  std::vector<VkPhysicalDevice> out(n);
  vk::check(vk::vkEnumeratePhysicalDevices(instance, &n, out.data()), "listing devices");
  out.resize(n);
  return out;
}

VulkanDeviceInfo describe(VkPhysicalDevice pd, size_t index) {
  VulkanDeviceInfo info;
  info.index = index;
  VkPhysicalDeviceFloatControlsProperties fc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  sg.pNext = &fc;
  drv.pNext = &sg;
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &drv;
  vk::vkGetPhysicalDeviceProperties2(pd, &props);
  info.name = props.properties.deviceName;
  info.type = type_name(props.properties.deviceType);
  info.api_version = version_string(props.properties.apiVersion);
  info.driver_name = drv.driverName;
  info.driver_info = drv.driverInfo;
  info.subgroup_size = sg.subgroupSize;
  info.denorm_preserve32 = fc.shaderDenormPreserveFloat32;
  info.denorm_flush32 = fc.shaderDenormFlushToZeroFloat32;
  info.rte32 = fc.shaderRoundingModeRTEFloat32;
  info.denorm_preserve64 = fc.shaderDenormPreserveFloat64;
  info.rte64 = fc.shaderRoundingModeRTEFloat64;

  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  feats.pNext = &f12;
  vk::vkGetPhysicalDeviceFeatures2(pd, &feats);
  info.float64 = feats.features.shaderFloat64;
  info.buffer_device_address = f12.bufferDeviceAddress;

  VkPhysicalDeviceMemoryProperties mem;
  vk::vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes = std::max<uint64_t>(info.device_local_bytes, mem.memoryHeaps[h].size);

  if (props.properties.apiVersion < VK_API_VERSION_1_2) info.unusable = "Vulkan " + info.api_version + " (1.2 needed)";
  else if (!info.float64) info.unusable = "no shaderFloat64 (the portable expf and tanhf compute in double)";
  else if (!info.buffer_device_address) info.unusable = "no bufferDeviceAddress";
  return info;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<VulkanDeviceInfo> vulkan_devices() {
  std::vector<VulkanDeviceInfo> out;
  const std::vector<VkPhysicalDevice> pds = physical_devices();
  for (size_t i = 0; i < pds.size(); ++i) out.push_back(describe(pds[i], i));
  return out;
}

VulkanDeviceInfo choose_vulkan_device(const std::string& spec) {
  const std::vector<VulkanDeviceInfo> all = vulkan_devices();
  if (all.empty())
    fail("vulkan: the loader found no device: install a driver (mesa-vulkan-drivers gives lavapipe, which runs "
         "on the CPU; NVIDIA's driver for its GPUs), or run with --backend cpu");
  std::string listing;
  for (const auto& d : all) listing += "\n  " + std::to_string(d.index) + ": " + d.name + " (" + d.type + ")";
  const VulkanDeviceInfo* pick = nullptr;
  if (spec.empty()) {
    for (const auto& d : all)
      if (d.unusable.empty() && (!pick || type_rank(d.type) < type_rank(pick->type))) pick = &d;
    if (!pick) fail("vulkan: no device can run deltafin's shaders:", listing, "\n(", all[0].name, ": ", all[0].unusable, ")");
  } else if (std::all_of(spec.begin(), spec.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    const size_t i = std::stoul(spec);
    if (i >= all.size()) fail("vulkan: --device ", spec, ": there are ", all.size(), " devices:", listing);
    pick = &all[i];
  } else {
    for (const auto& d : all)
      if (lower(d.name).find(lower(spec)) != std::string::npos) {
        pick = &d;
        break;
      }
    if (!pick) fail("vulkan: --device ", spec, ": no device's name contains it:", listing);
  }
  if (!pick->unusable.empty()) fail("vulkan: device ", pick->index, " (", pick->name, ") cannot run deltafin: ", pick->unusable);
  return *pick;
}

VulkanDevice::VulkanDevice(const VulkanDeviceInfo& which) : info_(which) {
  instance_ = shared_instance();
  const std::vector<VkPhysicalDevice> pds = physical_devices();
  if (which.index >= pds.size()) fail("vulkan: device ", which.index, " is gone");
  physical_ = pds[which.index];
  vk::vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  uint32_t nq = 0;
  vk::vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vk::vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, qf.data());
  bool found = false;
  for (uint32_t i = 0; i < nq && !found; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) queue_family_ = i, found = true;
  if (!found) fail("vulkan: ", info_.name, " has no compute queue");

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.bufferDeviceAddress = VK_TRUE;
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  feats.pNext = &f12;
  feats.features.shaderFloat64 = VK_TRUE;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &feats;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  vk::check(vk::vkCreateDevice(physical_, &dci, nullptr, &device_), "creating the device");
  vk::load_device_functions(device_);
  vk::vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_family_;
  vk::check(vk::vkCreateCommandPool(device_, &pci, nullptr, &pool_), "creating a command pool");
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  vk::check(vk::vkAllocateCommandBuffers(device_, &cai, &cmd_), "allocating a command buffer");
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk::check(vk::vkCreateFence(device_, &fci, nullptr, &fence_), "creating a fence");

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  VkPipelineLayoutCreateInfo lci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  lci.pushConstantRangeCount = 1;
  lci.pPushConstantRanges = &range;
  vk::check(vk::vkCreatePipelineLayout(device_, &lci, nullptr, &layout_), "creating the pipeline layout");
  // DELTAFIN_VULKAN_FMA=soft keeps the double-formed fma on a device whose
  // own is fused (to compare the two paths on one device).
  const char* fma_env = std::getenv("DELTAFIN_VULKAN_FMA");
  native_fma_ = !(fma_env && std::string(fma_env) == "soft") && check_native_fma();
}

// Triples where a fused and an unfused a b + c differ (c = -round(a b)
// leaves the product's rounding error, which only a fused fma keeps), and
// random ones, subnormal results among them. The device's fma() counts as
// fused only if every result is std::fma's, bit for bit.
bool VulkanDevice::check_native_fma() {
  std::mt19937 rng(36);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  const size_t n = 4096;
  std::vector<float> a(n), b(n), c(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = d(rng), b[i] = d(rng);
    if (i % 4 == 0) c[i] = -(a[i] * b[i]);
    else if (i % 4 == 1) c[i] = d(rng);
    else if (i % 4 == 2) a[i] *= 1e-38f, c[i] = -(a[i] * b[i]) * 0.5f;
    else c[i] = d(rng) * 1e-7f;
    want[i] = std::fma(a[i], b[i], c[i]);
  }
  VkBuf buf = make_buffer(4 * n * sizeof(float), true);
  float* f = static_cast<float*>(buf.mapped);
  std::copy(a.begin(), a.end(), f);
  std::copy(b.begin(), b.end(), f + n);
  std::copy(c.begin(), c.end(), f + 2 * n);
  struct {
    uint64_t a, b, c, dst;
    uint32_t n;
  } push{buf.address, buf.address + 4 * n, buf.address + 8 * n, buf.address + 12 * n, static_cast<uint32_t>(n)};
  VkPipeline p = make_pipeline("fma_check", true);
  VkCommandBuffer cb = commands();
  vk::vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vk::vkCmdPushConstants(cb, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
  vk::vkCmdDispatch(cb, static_cast<uint32_t>((n + 63) / 64), 1, 1);
  barrier();
  submit_and_wait();
  const bool fused = std::memcmp(f + 3 * n, want.data(), n * sizeof(float)) == 0;
  vk::vkDestroyPipeline(device_, p, nullptr);
  free_buffer(buf);
  return fused;
}

VulkanDevice::~VulkanDevice() {
  if (!device_) return;
  vk::vkDeviceWaitIdle(device_);
  for (auto& [name, p] : pipelines_) vk::vkDestroyPipeline(device_, p, nullptr);
  vk::vkDestroyPipelineLayout(device_, layout_, nullptr);
  vk::vkDestroyFence(device_, fence_, nullptr);
  vk::vkDestroyCommandPool(device_, pool_, nullptr);
  vk::vkDestroyDevice(device_, nullptr);
}

bool VulkanDevice::try_make_buffer(size_t bytes, bool host_visible, VkBuf& out) {
  bytes = std::max<size_t>(16, (bytes + 15) / 16 * 16);
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
              VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuf b;
  b.bytes = bytes;
  vk::check(vk::vkCreateBuffer(device_, &bci, nullptr, &b.buffer), "creating a buffer");
  VkMemoryRequirements req;
  vk::vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  // Host-visible: coherent, cached when offered (reads back fast); device:
  // device-local. Either falls back to any type the buffer accepts.
  const VkMemoryPropertyFlags want = host_visible
                                         ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                         : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  int type = -1;
  for (int pass = 0; pass < 2 && type < 0; ++pass)
    for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
      const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
      if (!(req.memoryTypeBits & (1u << i)) || (f & want) != want) continue;
      if (pass == 0 && host_visible && !(f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) continue;
      type = static_cast<int>(i);
      break;
    }
  if (type < 0) fail("vulkan: ", info_.name, " has no ", host_visible ? "host-visible" : "device-local", " memory type");
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.pNext = &flags;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  const VkResult r = vk::vkAllocateMemory(device_, &mai, nullptr, &b.memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    vk::vkDestroyBuffer(device_, b.buffer, nullptr);
    return false;
  }
  vk::check(r, "allocating memory");
  vk::check(vk::vkBindBufferMemory(device_, b.buffer, b.memory, 0), "binding memory");
  if (memory_.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
    vk::check(vk::vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "mapping memory");
  VkBufferDeviceAddressInfo ai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  ai.buffer = b.buffer;
  b.address = vk::vkGetBufferDeviceAddress(device_, &ai);
  out = b;
  return true;
}

VkBuf VulkanDevice::make_buffer(size_t bytes, bool host_visible) {
  VkBuf b;
  if (!try_make_buffer(bytes, host_visible, b))
    fail("vulkan: ", info_.name, ": out of ", host_visible ? "host-visible" : "device", " memory for a buffer of ",
         bytes, " bytes");
  return b;
}

void VulkanDevice::free_buffer(VkBuf& b) {
  if (!b.buffer) return;
  if (b.mapped) vk::vkUnmapMemory(device_, b.memory);
  vk::vkDestroyBuffer(device_, b.buffer, nullptr);
  vk::vkFreeMemory(device_, b.memory, nullptr);
  b = VkBuf{};
}

VkCommandBuffer VulkanDevice::commands() {
  if (!recording_) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk::check(vk::vkBeginCommandBuffer(cmd_, &bi), "beginning a command buffer");
    recording_ = true;
  }
  return cmd_;
}

// Every command waits for everything before it: ops are issued in program
// order and each reads what the last wrote.
void VulkanDevice::barrier() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vk::vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                           VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0,
                           nullptr);
}

VkPipeline VulkanDevice::pipeline(const char* shader) {
  auto it = pipelines_.find(shader);
  if (it != pipelines_.end()) return it->second;
  VkPipeline p = make_pipeline(shader, native_fma_);
  pipelines_.emplace(shader, p);
  return p;
}

VkPipeline VulkanDevice::make_pipeline(const char* shader, bool native_fma) {
  const EmbeddedShader* found = nullptr;
  for (const EmbeddedShader& s : embedded_shaders())
    if (std::strcmp(s.name, shader) == 0) found = &s;
  if (!found) fail("vulkan: no shader named ", shader, " is built in");
  VkShaderModuleCreateInfo mci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mci.codeSize = found->count * 4;
  mci.pCode = found->words;
  VkShaderModule module;
  vk::check(vk::vkCreateShaderModule(device_, &mci, nullptr, &module), "creating a shader module");
  // Constant 0 is common.glsl's kNativeFma.
  const VkBool32 fma_value = native_fma ? VK_TRUE : VK_FALSE;
  const VkSpecializationMapEntry entry{0, 0, sizeof(VkBool32)};
  VkSpecializationInfo spec{1, &entry, sizeof fma_value, &fma_value};
  VkComputePipelineCreateInfo cci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  cci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cci.stage.module = module;
  cci.stage.pName = "main";
  cci.stage.pSpecializationInfo = &spec;
  cci.layout = layout_;
  VkPipeline p;
  const VkResult r = vk::vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cci, nullptr, &p);
  vk::vkDestroyShaderModule(device_, module, nullptr);
  vk::check(r, (std::string("compiling shader ") + shader).c_str());
  return p;
}

void VulkanDevice::dispatch(const char* shader, const void* push, size_t push_bytes, uint32_t x, uint32_t y,
                            uint32_t z) {
  if (push_bytes > kPushBytes) fail("vulkan: ", shader, ": ", push_bytes, " bytes of push constants");
  if (x == 0 || y == 0 || z == 0) return;
  VkPipeline p = pipeline(shader);
  VkCommandBuffer c = commands();
  vk::vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vk::vkCmdPushConstants(c, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(push_bytes), push);
  vk::vkCmdDispatch(c, x, y, z);
  barrier();
}

void VulkanDevice::copy(const VkBuf& src, size_t src_offset, const VkBuf& dst, size_t dst_offset, size_t bytes) {
  if (bytes == 0) return;
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vk::vkCmdCopyBuffer(commands(), src.buffer, dst.buffer, 1, &region);
  barrier();
}

void VulkanDevice::copy_regions(const VkBuf& src, const VkBuf& dst, const std::vector<VkBufferCopy>& regions) {
  if (regions.empty()) return;
  vk::vkCmdCopyBuffer(commands(), src.buffer, dst.buffer, static_cast<uint32_t>(regions.size()), regions.data());
  barrier();
}

void VulkanDevice::submit_and_wait() {
  if (!recording_) return;
  vk::check(vk::vkEndCommandBuffer(cmd_), "ending a command buffer");
  recording_ = false;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  vk::check(vk::vkQueueSubmit(queue_, 1, &si, fence_), "submitting work");
  vk::check(vk::vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "waiting for the device");
  vk::check(vk::vkResetFences(device_, 1, &fence_), "resetting a fence");
  vk::check(vk::vkResetCommandBuffer(cmd_, 0), "resetting a command buffer");
}

}  // namespace deltafin
