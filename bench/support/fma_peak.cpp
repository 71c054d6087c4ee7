// See fma_peak.h. The x86 probes are compiled for their ISA by target
// attributes and entered only after __builtin_cpu_supports says so.
#include "support/fma_peak.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <time.h>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace deltafin::bench {

namespace {

// The thread's CPU time, not the wall clock: on a shared machine another
// process may hold the core for part of the run, and the peak is what the
// core does while this thread runs (the benchmarks' rates are per CPU second
// too).
struct CpuClock {
  static double now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
};

double seconds_since(double t) { return CpuClock::now() - t; }

#if defined(__x86_64__)
__attribute__((target("avx512f"))) double gflops_avx512(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  const double t = CpuClock::now();
  for (int64_t k = 0; k < iters; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  const double s = seconds_since(t);
  volatile float sink = 0;
  for (int i = 0; i < 12; ++i) sink = sink + _mm512_reduce_add_ps(acc[i]);
  return static_cast<double>(iters) * 12 * 16 * 2 / s / 1e9;
}

__attribute__((target("avx2,fma"))) double gflops_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  const double t = CpuClock::now();
  for (int64_t k = 0; k < iters; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  const double s = seconds_since(t);
  volatile float sink = 0;
  float lanes[8];
  for (int i = 0; i < 12; ++i) {
    _mm256_storeu_ps(lanes, acc[i]);
    for (float x : lanes) sink = sink + x;
  }
  return static_cast<double>(iters) * 12 * 8 * 2 / s / 1e9;
}
#endif

#if defined(__aarch64__)
// Advanced SIMD is baseline AArch64: 4-lane vfmaq_f32, no check needed.
double gflops_neon(int64_t iters) {
  float32x4_t acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = vdupq_n_f32(static_cast<float>(i));
  const float32x4_t a = vdupq_n_f32(0.999f), b = vdupq_n_f32(0.001f);
  const double t = CpuClock::now();
  for (int64_t k = 0; k < iters; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = vfmaq_f32(b, acc[i], a);
  const double s = seconds_since(t);
  volatile float sink = 0;
  for (int i = 0; i < 12; ++i) sink = sink + vaddvq_f32(acc[i]);
  return static_cast<double>(iters) * 12 * 4 * 2 / s / 1e9;
}
#endif

// Portable form: the compiler maps std::fma to the target's fused
// instruction (NEON's fmla on AArch64) and may vectorise the 12 chains.
double gflops_portable(int64_t iters) {
  float acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = static_cast<float>(i);
  const double t = CpuClock::now();
  for (int64_t k = 0; k < iters; ++k)
    for (float& a : acc) a = std::fma(a, 0.999f, 0.001f);
  const double s = seconds_since(t);
  volatile float sink = 0;
  for (float a : acc) sink = sink + a;
  return static_cast<double>(iters) * 12 * 2 / s / 1e9;
}

}  // namespace

double fma_gflops_one_thread(int64_t iters, const char** isa) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    *isa = "AVX-512";
    return gflops_avx512(iters);
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *isa = "AVX2";
    return gflops_avx2(iters);
  }
#elif defined(__aarch64__)
  *isa = "NEON";
  return gflops_neon(iters);
#endif
  *isa = "scalar";
  return gflops_portable(iters);
}

double fma_peak_gflops(int threads, const char** isa) {
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    std::vector<double> each(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i)
      pool.emplace_back([&, i] { each[static_cast<size_t>(i)] = fma_gflops_one_thread(20'000'000, isa); });
    for (std::thread& t : pool) t.join();
    double total = 0;
    for (double g : each) total += g;
    best = std::max(best, total);
  }
  return best;
}

}  // namespace deltafin::bench
