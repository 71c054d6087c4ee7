// The contract check of a Vulkan device: a few ops of every kind run on the
// device and on the CPU backend, and their bits are compared. It catches a
// driver that fuses or reorders what the shaders keep apart, rounds other
// than to nearest even, or flushes subnormals (docs/vulkan.md: the rule is
// IEEE-754's, subnormals kept, on every backend). `deltafin devices --check`
// prints it; the backend-ops test checks every op in full.
#pragma once

#include <string>
#include <vector>

#include "backend/vulkan/vulkan_device.h"

namespace deltafin {

struct VulkanContract {
  bool same_bits = true;          // every op on ordinary values gave the CPU's bits
  std::string subnormals;         // "kept" or "flushed (...)"
  bool native_fma = false;        // the device's fma() is fused (else formed from doubles)
  std::vector<std::string> failures;  // each op that differed, and how
};

VulkanContract check_vulkan_contract(const VulkanDeviceInfo& device);

}  // namespace deltafin
