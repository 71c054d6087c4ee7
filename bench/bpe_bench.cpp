// Byte-pair merging of one long piece (tokenizer/bpe.h): the heap merge that
// bpe_encode uses past 64 bytes against tiktoken's own loop, which rescans
// every pair after each merge (quadratic). The piece is "ab" repeated, over a
// table where ab, abab and abababab are tokens, at 1,000 to 25,000 bytes (the
// longest piece the long-input guard lets through); the figure is the time
// per piece and how it grows with length.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "tokenizer/bpe.h"

namespace {

using deltafin::RankTable;

const RankTable& table() {
  static const RankTable t = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* m : {"ab", "abab", "ba", "abababab", "abc"}) tokens.emplace_back(m);
    return RankTable(tokens);
  }();
  return t;
}

std::string piece(int64_t bytes) {
  std::string s;
  while (static_cast<int64_t>(s.size()) < bytes) s += "ab";
  return s;
}

void bench_encode(benchmark::State& state) {
  const std::string p = piece(state.range(0));
  std::vector<uint32_t> out;
  for (auto _ : state) {
    out.clear();
    deltafin::bpe_encode(p, table(), out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void bench_simple(benchmark::State& state) {
  const std::string p = piece(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(deltafin::bpe_merge_simple(p, table()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

}  // namespace

BENCHMARK(bench_encode)->Name("bpe/encode")->Arg(1000)->Arg(5000)->Arg(25000)->Unit(benchmark::kMillisecond);
BENCHMARK(bench_simple)->Name("bpe/tiktoken_loop")->Arg(1000)->Arg(5000)->Arg(25000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
