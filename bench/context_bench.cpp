// bench_context: decode time against context length, and what the session
// holds per position, for a K3-architecture checkpoint with every weight in
// RAM (bench/context/run.sh; results in bench/results/*-context*).
//
//   bench_context MODEL_DIR [--contexts 1024,8192,32768,131072] [--steps 8] [--threads N]
//   bench_context --session-figures PRESET   (tiny, small, bench, k3: computed, no weights)
//
// Prefilling a 128k-token prompt takes hours on a small machine, and decode
// cost does not depend on what the cached rows hold, so each context is made
// directly: a fresh session whose MLA layers get N latent rows of random
// values (a normalised latent's scale) and whose KDA state is zero. Then
// `steps` one-token decode passes are timed. Per context it prints the median
// ms per token, the latent-cache bytes a decode step reads (N rows of
// r_kv + d_rope floats per MLA layer) and, against the run at the smallest
// context, the extra ms per extra MB read, beside this machine's read
// bandwidth measured in the same run (a canonical sum over 1 GiB). It also
// reports the session's bytes per position computed and measured (RSS grown
// by filling the cache), and what the expanded cache would have held.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/kimi_k3/load/loaded_k3.h"
#include <nlohmann/json.hpp>

#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/presets.h"
#include "engine/memory_plan.h"
#include "kernels/ops.h"
#include "util/error.h"
#include "util/rng.h"

using namespace deltafin;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// GB/s of one thread summing a 1 GiB buffer (the canonical sum kernel), best of 3.
double read_bandwidth_gbs() {
  std::vector<float> big((1ull << 30) / sizeof(float), 1.0f);
  double best = 0;
  volatile float sink = 0;
  for (int r = 0; r < 3; ++r) {
    const auto t = Clock::now();
    sink = sink + sum(big.data(), big.size());
    const double s = std::chrono::duration<double>(Clock::now() - t).count();
    best = std::max(best, static_cast<double>(big.size() * sizeof(float)) / s / 1e9);
  }
  return best;
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  size_t at = 0;
  while (at < s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    v.push_back(std::stoll(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return v;
}

// The session a preset's config holds, computed (a real K3 is not run here).
int session_figures(const std::string& preset) {
  const K3Config c = parse_k3_config(k3_config_json(preset_dims(preset)), preset + " preset");
  int64_t mla_layers = 0;
  for (LayerKind k : c.layer_kinds) mla_layers += k == LayerKind::MLA;
  const uint64_t per_pos = K3Session::bytes_per_position(c), fixed = K3Session::fixed_bytes(c);
  const uint64_t expanded = static_cast<uint64_t>(mla_layers * c.num_attention_heads *
                                                  (c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim)) * 4;
  std::printf("preset %s: %lld MLA layers x %lld heads; KDA state %.1f MB fixed; per position %llu B latent "
              "(%llu B per MLA layer) vs %llu B expanded (%.1fx)\n",
              preset.c_str(), static_cast<long long>(mla_layers), static_cast<long long>(c.num_attention_heads),
              fixed / 1e6, static_cast<unsigned long long>(per_pos),
              static_cast<unsigned long long>(per_pos / std::max<int64_t>(mla_layers, 1)),
              static_cast<unsigned long long>(expanded), static_cast<double>(expanded) / static_cast<double>(per_pos));
  std::printf("%12s %18s %18s\n", "context", "latent session", "expanded session");
  for (const int64_t n : {int64_t{4096}, int64_t{32768}, int64_t{131072}, int64_t{1048576}}) {
    std::printf("%12lld %15.2f GiB %15.2f GiB\n", static_cast<long long>(n),
                static_cast<double>(fixed + per_pos * static_cast<uint64_t>(n)) / (1ull << 30),
                static_cast<double>(fixed + expanded * static_cast<uint64_t>(n)) / (1ull << 30));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc == 3 && std::string(argv[1]) == "--session-figures") return session_figures(argv[2]);
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_context MODEL_DIR [--contexts A,B,...] [--steps N] [--threads N]\n");
    return 2;
  }
  std::string dir = argv[1];
  std::vector<int64_t> contexts{1024, 8192, 32768, 131072};
  int steps = 8, threads = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--contexts") contexts = parse_list(v);
    else if (k == "--steps") steps = std::atoi(v.c_str());
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else fail("bench_context: unknown option ", k);
  }
  auto m = load_k3_resident(dir, threads);
  const K3Config& c = m->config;
  int64_t mla_layers = 0;
  for (LayerKind k : c.layer_kinds) mla_layers += k == LayerKind::MLA;
  const int64_t R = c.kv_lora_rank + c.qk_rope_head_dim;
  const uint64_t per_pos = K3Session::bytes_per_position(c);
  const uint64_t expanded = static_cast<uint64_t>(mla_layers * c.num_attention_heads *
                                                  (c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim)) * 4;
  const double bw = read_bandwidth_gbs();
  std::printf("model %s: %lld MLA layers x %lld heads, latent row %lld floats; session %llu B fixed + %llu B per "
              "position (the expanded K/V cache: %llu B per position, %.1fx more); one-thread read bandwidth %.2f GB/s; "
              "%d thread(s)\n",
              dir.c_str(), static_cast<long long>(mla_layers), static_cast<long long>(c.num_attention_heads),
              static_cast<long long>(R), static_cast<unsigned long long>(K3Session::fixed_bytes(c)),
              static_cast<unsigned long long>(per_pos), static_cast<unsigned long long>(expanded),
              static_cast<double>(expanded) / static_cast<double>(per_pos), bw, threads);
  std::printf("%10s %12s %14s %14s %16s %18s\n", "context", "ms/token", "cache MB/token", "extra ms/MB",
              "RSS B/position", "attention GB/s");
  Rng rng(7);
  double base_ms = -1, base_mb = 0;
  for (const int64_t n : contexts) {
    const uint64_t rss_before = current_rss_bytes();
    K3Session s(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      if (c.layer_kinds[static_cast<size_t>(l)] != LayerKind::MLA) continue;
      std::vector<float>& lat = s.mla(l).latent;
      lat.resize(static_cast<size_t>(n * R));
      for (float& x : lat) x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
    }
    s.advance(n);
    const uint64_t rss_after = current_rss_bytes();
    std::vector<double> ms;
    for (int i = 0; i < steps; ++i) {
      const uint32_t token[1] = {static_cast<uint32_t>(rng.below(static_cast<uint64_t>(c.vocab_size)))};
      const auto t = Clock::now();
      m->model->forward(s, token, false);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    }
    const double med = median(ms);
    const double mb = static_cast<double>(n) * static_cast<double>(per_pos) / 1e6;
    std::string extra = "-", gbs = "-";
    if (base_ms < 0) {
      base_ms = med, base_mb = mb;
    } else {
      const double dms = med - base_ms, dmb = mb - base_mb;
      extra = std::to_string(dms / dmb);
      gbs = std::to_string(dmb / 1e3 / (dms / 1e3));
    }
    std::printf("%10lld %12.3f %14.2f %14s %16.0f %18s\n", static_cast<long long>(n), med, mb, extra.c_str(),
                static_cast<double>(rss_after - rss_before) / static_cast<double>(n), gbs.c_str());
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_context: %s\n", e.what());
  return 1;
}
