// CRC-32C over one K3 expert record (17,547,264 bytes): the check every
// expert read pays before use (util/crc32c.h). bytes/s is the figure; at K3
// scale a cold token reads 25.8 GB, so 5 GB/s would cost ~5 core-seconds a
// token and 15 GB/s ~1.7.
#include <benchmark/benchmark.h>

#include <vector>

#include "util/crc32c.h"

namespace {

constexpr size_t kRecord = 17547264;

std::vector<uint8_t> record() {
  std::vector<uint8_t> buf(kRecord);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
  return buf;
}

void bench_crc32c(benchmark::State& state) {
  const std::vector<uint8_t> buf = record();
  for (auto _ : state) benchmark::DoNotOptimize(deltafin::crc32c(buf.data(), buf.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kRecord));
}

void bench_crc32c_portable(benchmark::State& state) {
  const std::vector<uint8_t> buf = record();
  for (auto _ : state) benchmark::DoNotOptimize(deltafin::crc32c_portable(buf.data(), buf.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kRecord));
}

}  // namespace

BENCHMARK(bench_crc32c)->Name("crc32c/record")->Unit(benchmark::kMillisecond);
BENCHMARK(bench_crc32c_portable)->Name("crc32c_portable/record")->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
