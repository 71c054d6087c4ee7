// What is particular to the Vulkan backend, beyond the backend-ops test's
// equal bits: where weights live (the spine uploaded once, a host buffer
// reused at the same address re-uploaded, routed experts in the device
// expert tier, least recently used out first under a small budget, staged
// when nothing fits), the device choice and its errors. Every product is
// also checked against the CPU backend's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/select/make_backend.h"
#include "support/test_support.h"
#include "util/rng.h"

#if DELTAFIN_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

using namespace deltafin;
using namespace deltafin::test;

namespace {

TEST(BackendChoice, AnUnknownBackendIsAnErrorNamingIt) {
  EXPECT_FAILS_WITH(make_backend(BackendChoice{"gpu", "", 0}, nullptr), "gpu", "cpu or vulkan");
  EXPECT_FAILS_WITH(make_backend(BackendChoice{"gpu", "", 0, true}, nullptr), "DELTAFIN_BACKEND=gpu", "cpu or vulkan");
  EXPECT_EQ(std::string(make_backend(BackendChoice{}, nullptr)->name()), "cpu");
}

#if DELTAFIN_HAVE_VULKAN

const VulkanDeviceInfo* device() {
  static std::optional<VulkanDeviceInfo> d = []() -> std::optional<VulkanDeviceInfo> {
    try {
      return choose_vulkan_device("");
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }();
  return d ? &*d : nullptr;
}

#define REQUIRE_DEVICE() \
  REQUIRE_CAPABILITY("vulkan", device() != nullptr, "the loader found no usable Vulkan device")

std::vector<float> random_values(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (float& f : v) f = static_cast<float>(rng.uniform() * 2 - 1);
  return v;
}

// y = x W^T on a backend, read back.
std::vector<float> product(Backend& be, const WeightView& w, const std::vector<float>& x, size_t T) {
  Act xa = be.act(T, w.cols), ya = be.act(T, w.rows);
  be.write(xa, 0, x);
  be.matmul(w, xa, ya);
  std::vector<float> y(T * w.rows);
  be.read(ya, 0, y);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

struct Expert {
  std::vector<float> data;
  WeightView view(uint64_t key) const { return WeightView{WeightType::F32, 16, 64, data.data(), nullptr, key}; }
};

TEST(VulkanBackend, ExpertsStayInTheDeviceTierAndAreHitAfterwards) {
  REQUIRE_DEVICE();
  Rng rng(1);
  CpuBackend cpu(nullptr);
  VulkanBackend gpu(*device(), 0, nullptr);
  std::vector<Expert> experts(3);
  for (Expert& e : experts) e.data = random_values(rng, 16 * 64);
  const std::vector<float> x = random_values(rng, 2 * 64);
  for (int round = 0; round < 3; ++round)
    for (size_t e = 0; e < experts.size(); ++e) {
      const WeightView w = experts[e].view(100 + e);
      EXPECT_TRUE(same_bits(product(gpu, w, x, 2), product(cpu, w, x, 2))) << "expert " << e << " round " << round;
    }
  const VulkanStats s = gpu.stats();
  EXPECT_EQ(s.tier_misses, 3u);  // each expert's first use fills the tier
  EXPECT_EQ(s.tier_hits, 6u);
  EXPECT_EQ(s.tier_evictions, 0u);
  EXPECT_GE(s.tier_bytes, 3u * 16 * 64 * 4);
  EXPECT_EQ(s.weight_bytes_staged, 0u);
}

TEST(VulkanBackend, ASmallBudgetEvictsTheLeastRecentlyUsedExpert) {
  REQUIRE_DEVICE();
  Rng rng(2);
  CpuBackend cpu(nullptr);
  // Room for two experts of 4 KiB (device buffers are 16-byte multiples).
  VulkanBackend gpu(*device(), 2 * 16 * 64 * 4, nullptr);
  std::vector<Expert> experts(3);
  for (Expert& e : experts) e.data = random_values(rng, 16 * 64);
  const std::vector<float> x = random_values(rng, 64);
  const auto use = [&](size_t e) {
    const WeightView w = experts[e].view(7 + e);
    EXPECT_TRUE(same_bits(product(gpu, w, x, 1), product(cpu, w, x, 1))) << "expert " << e;
  };
  use(0), use(1), use(0);  // 0 is now the most recent
  use(2);                  // evicts 1, the least recently used
  EXPECT_EQ(gpu.stats().tier_evictions, 1u);
  const uint64_t hits = gpu.stats().tier_hits;
  use(0);  // still there
  EXPECT_EQ(gpu.stats().tier_hits, hits + 1);
  use(1);  // was evicted: a miss
  EXPECT_EQ(gpu.stats().tier_hits, hits + 1);
  EXPECT_EQ(gpu.stats().tier_misses, 4u);
}

TEST(VulkanBackend, WhatDoesNotFitTheBudgetIsStagedPerUse) {
  REQUIRE_DEVICE();
  Rng rng(3);
  CpuBackend cpu(nullptr);
  VulkanBackend gpu(*device(), 1024, nullptr);  // smaller than any matrix below
  Expert spine, expert;
  spine.data = random_values(rng, 16 * 64);
  expert.data = random_values(rng, 16 * 64);
  const std::vector<float> x = random_values(rng, 64);
  for (const WeightView& w : {spine.view(0), expert.view(9)})
    EXPECT_TRUE(same_bits(product(gpu, w, x, 1), product(cpu, w, x, 1)));
  EXPECT_EQ(gpu.stats().spine_bytes_on_device, 0u);
  EXPECT_EQ(gpu.stats().tier_bytes, 0u);
  EXPECT_EQ(gpu.stats().weight_bytes_staged, 2u * 16 * 64 * 4);
}

// A spine matrix is keyed by its host address; a buffer freed and reused
// there with other bytes must not be served from the old upload.
TEST(VulkanBackend, ASpineBufferReusedWithOtherBytesIsUploadedAgain) {
  REQUIRE_DEVICE();
  Rng rng(4);
  CpuBackend cpu(nullptr);
  VulkanBackend gpu(*device(), 0, nullptr);
  std::vector<float> storage = random_values(rng, 16 * 64);
  const WeightView w{WeightType::F32, 16, 64, storage.data(), nullptr};
  const std::vector<float> x = random_values(rng, 64);
  const std::vector<float> first = product(gpu, w, x, 1);
  EXPECT_TRUE(same_bits(first, product(cpu, w, x, 1)));
  const std::vector<float> other = random_values(rng, 16 * 64);
  std::copy(other.begin(), other.end(), storage.begin());  // the same address, other bytes
  const WeightView w2 = w;
  const std::vector<float> second = product(gpu, w2, x, 1);
  EXPECT_TRUE(same_bits(second, product(cpu, w2, x, 1)));
  EXPECT_FALSE(same_bits(first, second));
}

// A product of more x rows than one dispatch holds (65,535 tiles of 8 rows)
// runs in blocks of rows, with the CPU's bits.
TEST(VulkanBackend, AProductPastOneDispatchRunsInBlocksOfRows) {
  REQUIRE_DEVICE();
  Rng rng(5);
  CpuBackend cpu(nullptr);
  VulkanBackend gpu(*device(), 0, nullptr);
  const size_t T = 8 * 65535 + 3;
  Expert w;
  w.data = random_values(rng, 2 * 32);
  const WeightView view{WeightType::F32, 2, 32, w.data.data(), nullptr};
  const std::vector<float> x = random_values(rng, T * 32);
  EXPECT_TRUE(same_bits(product(gpu, view, x, T), product(cpu, view, x, T)));
}

TEST(VulkanDevices, ADeviceNamedWrongIsAnErrorListingTheDevices) {
  REQUIRE_DEVICE();
  EXPECT_FAILS_WITH(choose_vulkan_device("no-such-gpu"), "no-such-gpu", "no device's name contains it",
                    device()->name);
  EXPECT_FAILS_WITH(choose_vulkan_device("99"), "--device 99", "devices");
  EXPECT_EQ(choose_vulkan_device(std::to_string(device()->index)).name, device()->name);
  EXPECT_NE(describe_devices(false).find(device()->name), std::string::npos);
}

TEST(VulkanDevices, TheContractCheckPassesOnTheTestDevice) {
  REQUIRE_DEVICE();
  const std::string text = describe_devices(true);
  EXPECT_NE(text.find("the CPU's bits on every op"), std::string::npos) << text;
  EXPECT_NE(text.find("subnormals kept"), std::string::npos) << text;
}

#endif

}  // namespace
