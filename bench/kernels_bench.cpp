// Kernel benchmarks, single thread, per ISA path:
//   membw/sum/<isa>                         read bandwidth: sum() over a 1 GiB float array
//   membw/sum4streams/<isa>                 the same array read as 4 interleaved streams
//   matmul/<type>/<rows>x<cols>/<isa>       y = W x (T = 1): weight bytes/s and GFLOP/s
//                                           (2048x7168: bf16, mxfp4, fp8-block, int4-group32)
//   batched/<type>/3072x3584/T<T>/<isa>     T = 1, 2, 4, ..., 64: rows (positions) per second
//   peak/fma                                this thread's FMA peak (the compute roof)
//   math/{tanhf,expf}/{portable,glibc}      ns per call (items/s) of portable_math.h's and glibc's
//   ops/situ/<isa>                          SiTU over 3072 elements: elements/s
// bench/kernels/roofline.sh runs the roofline subset and tables it.
// Each matrix case rotates through enough copies of its weights (>= 1 GiB in
// all, several times the 300 MiB L3 of the reference machine) that every
// iteration streams its weights from memory. Ratios to the bandwidth are
// computed from one run (bench/results/*-kernels.md).
//
//   build/kern/bench/bench_kernels --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/portable_math.h"
#include "kernels/weights.h"
#include "support/fma_peak.h"

using namespace deltafin;

namespace {

constexpr size_t kMinWorkingSet = size_t{1} << 30;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer alloc64(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  return Buffer(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
}

uint64_t next(uint64_t& s) {  // xorshift64*: fast enough to fill gigabytes
  s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Dull;
}

// Normal finite values (no subnormals, which would slow the arithmetic down):
// random sign and mantissa, exponent 2^-7 .. 2^0.
uint32_t random_f32_bits(uint64_t r) { return (uint32_t(r) & 0x807FFFFFu) | uint32_t(120 + ((r >> 32) & 7)) << 23; }
uint16_t random_bf16_bits(uint64_t r) { return uint16_t((r & 0x807F) | (120 + ((r >> 16) & 7)) << 7); }

// `copies` matrices of one type and shape, back to back.
struct MatrixSet {
  WeightType type;
  size_t rows, cols, copies;
  size_t data_bytes, scale_bytes;  // per copy
  Buffer data, scales;

  WeightView view(size_t i) const {
    WeightView w;
    w.type = type;
    w.rows = rows;
    w.cols = cols;
    w.data = data.get() + i * data_bytes;
    w.scales = scale_bytes ? scales.get() + i * scale_bytes : nullptr;
    return w;
  }
};

MatrixSet make_set(WeightType type, size_t rows, size_t cols) {
  MatrixSet s{type, rows, cols, 0, 0, 0, nullptr, nullptr};
  size_t n = rows * cols;
  switch (type) {
    case WeightType::F32: s.data_bytes = n * 4; break;
    case WeightType::BF16: s.data_bytes = n * 2; break;
    case WeightType::Int8Row: s.data_bytes = n, s.scale_bytes = rows * 2; break;
    case WeightType::MXFP4: s.data_bytes = n / 2, s.scale_bytes = n / 32; break;
    case WeightType::FP8Block: s.data_bytes = n, s.scale_bytes = ((rows + 127) / 128) * ((cols + 127) / 128) * 4; break;
    case WeightType::Int4Group32: s.data_bytes = n / 2, s.scale_bytes = n / 32 * 2; break;
  }
  size_t per_copy = s.data_bytes + s.scale_bytes;
  s.copies = (kMinWorkingSet + per_copy - 1) / per_copy;
  if (s.copies < 2) s.copies = 2;
  s.data = alloc64(s.data_bytes * s.copies);
  if (s.scale_bytes) s.scales = alloc64(s.scale_bytes * s.copies);
  uint64_t seed = 0x9E3779B97F4A7C15ull ^ (rows * 131 + cols);
  uint8_t* d = s.data.get();
  size_t total = s.data_bytes * s.copies;
  if (type == WeightType::F32) {
    for (size_t i = 0; i < total; i += 4) {
      uint32_t b = random_f32_bits(next(seed));
      std::memcpy(d + i, &b, 4);
    }
  } else if (type == WeightType::BF16) {
    for (size_t i = 0; i < total; i += 2) {
      uint16_t b = random_bf16_bits(next(seed));
      std::memcpy(d + i, &b, 2);
    }
  } else if (type == WeightType::FP8Block) {
    // e4m3 codes of magnitude 2^0 .. 2^7 x (1 + m/8), sign random: a real
    // block's scale is its amax / 448, so most of its codes are large, and
    // the subnormal ones (|value| < 2^-6, a normal block's weights under
    // about 1.4e-4 sigma: 1 in 10^4) are left out.
    for (size_t i = 0; i < total; ++i) {
      uint64_t r = next(seed);
      const uint8_t exponent = static_cast<uint8_t>(7 + (r >> 8) % 8);  // 2^0 .. 2^7
      d[i] = static_cast<uint8_t>((r & 0x80) | exponent << 3 | ((r >> 4) & 7));
    }
  } else {  // int8 values, e2m1 and int4 nibbles: any byte is valid
    for (size_t i = 0; i < total; i += 8) {
      uint64_t r = next(seed);
      std::memcpy(d + i, &r, 8);
    }
  }
  if (type == WeightType::Int8Row) {
    for (size_t i = 0; i < rows * s.copies; ++i) {
      uint16_t h = 0x211F;  // f16 0.0101: about max|w| / 127 for |w| < 1.3
      std::memcpy(s.scales.get() + 2 * i, &h, 2);
    }
  } else if (type == WeightType::MXFP4) {
    uint8_t* sc = s.scales.get();
    for (size_t i = 0; i < s.scale_bytes * s.copies; ++i) sc[i] = uint8_t(118 + next(seed) % 13);
  } else if (type == WeightType::FP8Block) {
    for (size_t i = 0; i < s.scale_bytes * s.copies; i += 4) {
      const float scale = 1e-4f * float(1 + next(seed) % 64);  // weight_scale_inv: amax / 448 of a block
      std::memcpy(s.scales.get() + i, &scale, 4);
    }
  } else if (type == WeightType::Int4Group32) {
    for (size_t i = 0; i < s.scale_bytes * s.copies; i += 2) {
      const uint16_t h = random_bf16_bits(next(seed)) & 0x7FFF;  // positive
      std::memcpy(s.scales.get() + i, &h, 2);
    }
  }
  return s;
}

// One matrix set alive at a time (the benchmarks are registered grouped by
// set), so peak memory stays near 1 GiB plus the bandwidth array.
const MatrixSet& matrices(WeightType type, size_t rows, size_t cols) {
  static std::unique_ptr<MatrixSet> current;
  if (!current || current->type != type || current->rows != rows || current->cols != cols) {
    current.reset();
    current = std::make_unique<MatrixSet>(make_set(type, rows, cols));
  }
  return *current;
}

std::vector<float> random_x(size_t n) {
  std::vector<float> x(n);
  uint64_t seed = 12345;
  for (float& f : x) {
    uint32_t b = random_f32_bits(next(seed));
    std::memcpy(&f, &b, 4);
  }
  return x;
}

void bench_matmul(benchmark::State& state, Isa isa, WeightType type, size_t rows, size_t cols, size_t T) {
  set_active_isa(isa);
  const MatrixSet& set = matrices(type, rows, cols);
  std::vector<float> x = random_x(T * cols), y(T * rows);
  size_t i = 0;
  for (auto _ : state) {
    matmul(set.view(i % set.copies), x.data(), T, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    ++i;
  }
  double iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weight_bytes(set.view(0))));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * T));  // rows (positions) of x
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(rows) * double(cols) * double(T) * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["copies"] = static_cast<double>(set.copies);
}

void bench_membw(benchmark::State& state, Isa isa) {
  set_active_isa(isa);
  static std::vector<float> big;
  if (big.empty()) big.assign(kMinWorkingSet / sizeof(float), 1.0f);
  for (auto _ : state) {
    float s = sum(big.data(), big.size());
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kMinWorkingSet));
}

// The same 1 GiB read as four interleaved streams (16 KiB from each quarter
// in turn), like a product advancing several rows at once: a second reference,
// since one stream does not reach the read bandwidth several streams do.
void bench_membw4(benchmark::State& state, Isa isa) {
  set_active_isa(isa);
  static std::vector<float> big;
  if (big.empty()) big.assign(kMinWorkingSet / sizeof(float), 1.0f);
  const size_t quarter = big.size() / 4, chunk = 4096;
  for (auto _ : state) {
    float s = 0.0f;
    for (size_t c = 0; c < quarter; c += chunk)
      for (size_t q = 0; q < 4; ++q) s += sum(big.data() + q * quarter + c, chunk);
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kMinWorkingSet));
}

// The compute roof beside the products: register-only FMAs on this thread.
void bench_fma_peak(benchmark::State& state) {
  const char* isa = "";
  double gflops = 0;
  for (auto _ : state) gflops = deltafin::bench::fma_gflops_one_thread(5'000'000, &isa);
  state.counters["GFLOP/s"] = gflops;
  state.SetLabel(isa);
}

// ns per call of the forward pass's transcendentals against glibc's, over
// 2^20 inputs in [-6, 6) (SiTU's range).
template <float (*Fn)(float)>
void bench_transcendental(benchmark::State& state) {
  std::vector<float> x(size_t{1} << 20);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -6.0f + 12.0f * static_cast<float>(i) / static_cast<float>(x.size());
  for (auto _ : state) {
    float s = 0;
    for (float v : x) s += Fn(v);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(x.size()));
}
// SiTU over one K3 expert's 3072 activations (beta 4, beta_lin 25), per ISA
// path: ns per element (items/s).
void bench_situ(benchmark::State& state, Isa isa) {
  set_active_isa(isa);
  const size_t n = 3072;
  std::vector<float> g(n), u(n), out(n);
  for (size_t i = 0; i < n; ++i) g[i] = -6.0f + 12.0f * static_cast<float>(i) / n, u[i] = 30.0f - 60.0f * g[i] / 6.0f;
  for (auto _ : state) {
    situ(g.data(), u.data(), n, 4.0f, 25.0f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

float glibc_tanhf(float x) { return std::tanh(x); }
float glibc_expf(float x) { return std::exp(x); }

std::string shape_name(size_t rows, size_t cols) { return std::to_string(rows) + "x" + std::to_string(cols); }

void register_all() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas)
    if (isa_supported(isa)) isas.push_back(isa);

  benchmark::RegisterBenchmark("peak/fma", bench_fma_peak)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("math/tanhf/portable", bench_transcendental<portable_tanhf>);
  benchmark::RegisterBenchmark("math/tanhf/glibc", bench_transcendental<glibc_tanhf>);
  benchmark::RegisterBenchmark("math/expf/portable", bench_transcendental<portable_expf>);
  benchmark::RegisterBenchmark("math/expf/glibc", bench_transcendental<glibc_expf>);
  for (Isa isa : isas) benchmark::RegisterBenchmark((std::string("ops/situ/") + isa_name(isa)).c_str(), bench_situ, isa);
  for (Isa isa : isas)
    benchmark::RegisterBenchmark((std::string("membw/sum/") + isa_name(isa)).c_str(), bench_membw, isa)
        ->Unit(benchmark::kMillisecond);
  for (Isa isa : isas)
    benchmark::RegisterBenchmark((std::string("membw/sum4streams/") + isa_name(isa)).c_str(), bench_membw4, isa)
        ->Unit(benchmark::kMillisecond);

  struct Case {
    WeightType type;
    size_t rows, cols;
  };
  std::vector<Case> cases;
  const size_t spine[][2] = {{7168, 12288}, {12288, 7168}, {18432, 1536}};
  for (WeightType t : {WeightType::F32, WeightType::BF16, WeightType::Int8Row})
    for (auto& s : spine) cases.push_back({t, s[0], s[1]});
  const size_t expert[][2] = {{3072, 3584}, {3584, 3072}};
  for (WeightType t : {WeightType::BF16, WeightType::MXFP4})
    for (auto& s : expert) cases.push_back({t, s[0], s[1]});
  cases.push_back({WeightType::Int8Row, 3072, 3584});  // the batched sweep's int8-row case
  // DeepSeek V3 / Kimi K2's expert gate and up projection [2048, 7168], in
  // the released FP8 and INT4 beside BF16 and MXFP4.
  for (WeightType t : {WeightType::BF16, WeightType::MXFP4, WeightType::FP8Block, WeightType::Int4Group32})
    cases.push_back({t, 2048, 7168});

  for (const Case& c : cases) {
    for (Isa isa : isas) {
      std::string name = std::string("matmul/") + weight_type_name(c.type) + "/" + shape_name(c.rows, c.cols) + "/" +
                         isa_name(isa);
      benchmark::RegisterBenchmark(name.c_str(), bench_matmul, isa, c.type, c.rows, c.cols, size_t{1})
          ->Unit(benchmark::kMillisecond);
    }
    // Batched scaling at one expert shape, on the SIMD paths (the scalar
    // path's libm fma makes T = 64 take seconds per iteration).
    if (c.rows == 3072 && c.cols == 3584) {
      for (Isa isa : isas) {
        if (isa == Isa::Scalar) continue;
        for (size_t T : {1, 2, 4, 8, 16, 32, 64}) {
          std::string name = std::string("batched/") + weight_type_name(c.type) + "/" + shape_name(c.rows, c.cols) +
                             "/T" + std::to_string(T) + "/" + isa_name(isa);
          benchmark::RegisterBenchmark(name.c_str(), bench_matmul, isa, c.type, c.rows, c.cols, T)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::AddCustomContext("deltafin_isa_detected", isa_name(detect_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
