// The machine's fused multiply-add peak, measured: the compute roof the
// benchmarks put their products beside (bench_kernels' roofline,
// bench_context's prefill floor).
#pragma once

#include <cstdint>

namespace deltafin::bench {

// GFLOP/s of one thread running the widest FMA this CPU has on registers only
// (12 independent accumulators, so the FMA units, not a dependency chain, set
// the pace); `iters` rounds of 12 FMAs. *isa names the instructions used
// ("AVX-512", "AVX2", or "scalar" where neither exists).
double fma_gflops_one_thread(int64_t iters, const char** isa);

// The sum over `threads` threads running it at once, best of 3.
double fma_peak_gflops(int threads, const char** isa);

}  // namespace deltafin::bench
