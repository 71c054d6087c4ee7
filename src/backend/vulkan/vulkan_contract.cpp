#include "backend/vulkan/vulkan_contract.h"

#include <cstring>
#include <random>

#include "backend/cpu_backend.h"
#include "backend/vulkan/vulkan_backend.h"

namespace deltafin {

namespace {

struct Pair {
  CpuBackend& cpu;
  VulkanBackend& gpu;
};

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Runs op on both backends from the same inputs and compares the output's bits.
template <class Op>
size_t differing(Pair& p, const std::vector<std::vector<float>>& inputs, size_t rows, size_t out_width, Op op) {
  std::vector<float> got[2];
  Backend* backends[2] = {&p.cpu, &p.gpu};
  for (int b = 0; b < 2; ++b) {
    Backend& be = *backends[b];
    std::vector<Act> in;
    for (const auto& v : inputs) {
      in.push_back(be.act(rows, v.size() / rows));
      be.write(in.back(), 0, v);
    }
    Act out = be.act(rows, out_width);
    op(be, in, out);
    got[b].resize(rows * out_width);
    be.read(out, 0, got[b]);
  }
  size_t n = 0;
  for (size_t i = 0; i < got[0].size(); ++i) n += std::memcmp(&got[0][i], &got[1][i], 4) != 0;
  return n;
}

}  // namespace

VulkanContract check_vulkan_contract(const VulkanDeviceInfo& device) {
  VulkanContract c;
  CpuBackend cpu(nullptr);
  VulkanBackend gpu(device, 0, nullptr);
  Pair p{cpu, gpu};
  c.native_fma = gpu.native_fma();
  std::mt19937 rng(20261205);
  const size_t T = 3, d = 70, rows = 37;
  const auto x = random_floats(rng, T * d, 2.0f);
  const auto note = [&](const std::string& what, size_t n) {
    if (n == 0) return;
    c.same_bits = false;
    c.failures.push_back(what + ": " + std::to_string(n) + " values differ");
  };
  // Products: fma in the canonical order, over every column class.
  std::vector<float> wf = random_floats(rng, rows * d, 1.0f);
  const WeightView wv{WeightType::F32, rows, d, wf.data(), nullptr};
  note("matmul", differing(p, {x}, T, rows, [&](Backend& be, auto& in, Act& out) { be.matmul(wv, in[0], out); }));
  // Division, square root (rmsnorm), expf and tanhf (SiTU, SiLU).
  note("rmsnorm", differing(p, {x}, T, d, [&](Backend& be, auto& in, Act& out) { be.rmsnorm(in[0], {}, 1e-6f, out); }));
  const auto g = random_floats(rng, T * d, 12.0f);
  note("silu gate", differing(p, {x}, T, rows, [&](Backend& be, auto& in, Act& out) {
    be.gated_matmul(wv, wv, in[0], Gate::silu_mul(), out);
  }));
  note("situ gate", differing(p, {x}, T, rows, [&](Backend& be, auto& in, Act& out) {
    be.gated_matmul(wv, wv, in[0], Gate::situ(3.0f, 7.0f), out);
  }));
  note("mul_sigmoid", differing(p, {x, g}, T, d, [&](Backend& be, auto& in, Act& out) {
    be.copy(in[0], out);
    be.mul_sigmoid(out, in[1]);
  }));

  // Subnormals: products and sums below 2^-126 must keep their bits.
  std::vector<float> tiny(rows * d);
  for (size_t i = 0; i < tiny.size(); ++i) tiny[i] = (i % 2 ? 1 : -1) * 1e-39f * static_cast<float>(1 + i % 7);
  const WeightView wt{WeightType::F32, rows, d, tiny.data(), nullptr};
  const size_t sub = differing(p, {x}, T, rows, [&](Backend& be, auto& in, Act& out) { be.matmul(wt, in[0], out); }) +
                     differing(p, {tiny}, rows, d, [&](Backend& be, auto& in, Act& out) {
                       be.copy(in[0], out);
                       be.add(out, in[0]);
                     });
  c.subnormals = sub == 0 ? "kept" : "flushed (" + std::to_string(sub) + " subnormal results differ from the CPU's)";
  if (sub) c.failures.push_back("subnormals: " + c.subnormals);
  return c;
}

}  // namespace deltafin
