// bench_context: decode time against context length, and what the session
// holds per position, for a K3-architecture checkpoint with every weight in
// RAM (bench/context/run.sh; results in bench/results/*-context*).
//
//   bench_context MODEL_DIR [--contexts 1024,8192,32768,131072] [--steps 8] [--threads N]
//   bench_context MODEL_DIR --prefill 1024,8192,32768 [--threads N] [--chunk N]
//   bench_context --session-figures PRESET   (tiny, small, bench, k3: computed, no weights)
//
// --prefill times a real prefill (engine/prefill.h: layer-major groups,
// expert-major slices) of N random tokens, which is the time to the first
// token, against its compute floor: the prompt's multiply-adds counted from
// the checkpoint (every spine matrix once per position, the top-k experts'
// MXFP4 weights, the absorbed MLA attention over every earlier position, the
// KDA state update) at this machine's FMA peak measured in the same run
// (register-resident fused multiply-adds, all threads). It also reports the
// peak RSS of the prefill against the plan: the RSS after loading plus the
// session the engine budgets for N positions (ModelSummary: fixed, per
// position, and the pass's activation rows).
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

#include <fstream>
#include <thread>

#include "support/fma_peak.h"

#include "engine/prefill.h"
#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/load/loaded_k3.h"
#include <nlohmann/json.hpp>

#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/presets.h"
#include "experts/memory_plan.h"
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
  // Attention work per (query, key) pair in a prefill, both forms (k3-model.md §7.4).
  const int64_t absorbed = mla_layers * c.num_attention_heads * (2 * c.kv_lora_rank + c.qk_rope_head_dim);
  const int64_t expanded_pair = mla_layers * c.num_attention_heads * (c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim);
  std::printf("attention multiply-adds per (query, key) pair: absorbed %lld, re-expanded %lld (%.2fx fewer); "
              "expanding a cached row costs %lld once per position\n",
              static_cast<long long>(absorbed), static_cast<long long>(expanded_pair),
              static_cast<double>(absorbed) / static_cast<double>(expanded_pair),
              static_cast<long long>(mla_layers * c.num_attention_heads * c.kv_lora_rank * (c.qk_nope_head_dim + c.v_head_dim)));
  std::printf("%12s %18s %18s\n", "context", "latent session", "expanded session");
  for (const int64_t n : {int64_t{4096}, int64_t{32768}, int64_t{131072}, int64_t{1048576}}) {
    std::printf("%12lld %15.2f GiB %15.2f GiB\n", static_cast<long long>(n),
                static_cast<double>(fixed + per_pos * static_cast<uint64_t>(n)) / (1ull << 30),
                static_cast<double>(fixed + expanded * static_cast<uint64_t>(n)) / (1ull << 30));
  }
  return 0;
}

// Multiply-adds of a prefill, counted from the checkpoint.
struct PrefillWork {
  double spine_per_position = 0;   // every BF16 matrix (and conv) of the layers once, but embeddings and lm_head
  double experts_per_position = 0; // top-k routed experts' MXFP4 weights per MoE layer
  double kda_per_position = 0;     // the KDA state: ~4 K^2 per head (decay, S k, the update, q S)
  double mla_per_pair = 0;         // absorbed attention per (query, earlier key) pair: H (R + r_kv) over MLA layers
  double lm_head = 0;              // once, for the last position
  // The re-expanded form, for comparison (not run): per pair H (nope + rope + v)
  // over the expanded K/V, and per position kv_b's product to expand its row
  // (which the absorbed form spends per query instead: counted in the spine).
  double expanded_per_pair = 0;
  double macs(int64_t n) const {
    const double nn = static_cast<double>(n);
    return nn * (spine_per_position + experts_per_position + kda_per_position) + mla_per_pair * nn * (nn + 1) / 2 + lm_head;
  }
  double expanded_macs(int64_t n) const {
    const double nn = static_cast<double>(n);
    return macs(n) + (expanded_per_pair - mla_per_pair) * nn * (nn + 1) / 2;
  }
};

PrefillWork count_prefill_work(const std::string& dir, const K3Config& c) {
  const K3Checkpoint ck = load_k3_checkpoint(dir);
  PrefillWork w;
  double experts_all = 0;
  for (const std::string& name : ck.tensors.names()) {
    if (name.rfind("language_model.model.layers.", 0) != 0 && name != "language_model.lm_head.weight") continue;
    const TensorInfo& t = *ck.tensor(name).info;
    if (name == "language_model.lm_head.weight") {
      w.lm_head = static_cast<double>(t.elements());
      continue;
    }
    if (name.find(".experts.") != std::string::npos) {
      if (name.ends_with(".weight_packed")) experts_all += 2.0 * static_cast<double>(t.elements());  // two FP4 weights a byte
      continue;
    }
    if (t.shape.size() >= 2) w.spine_per_position += static_cast<double>(t.elements());
  }
  int64_t moe_layers = 0, mla_layers = 0, kda_layers = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    moe_layers += c.is_moe_layer(l);
    mla_layers += c.layer_kinds[static_cast<size_t>(l)] == LayerKind::MLA;
    kda_layers += c.layer_kinds[static_cast<size_t>(l)] != LayerKind::MLA;
  }
  w.experts_per_position = experts_all / static_cast<double>(moe_layers * c.num_experts) *
                           static_cast<double>(moe_layers * c.num_experts_per_token);
  w.kda_per_position = 4.0 * static_cast<double>(kda_layers * c.kda_num_heads * c.kda_head_dim * c.kda_head_dim);
  w.mla_per_pair = static_cast<double>(mla_layers * c.num_attention_heads *
                                       (2 * c.kv_lora_rank + c.qk_rope_head_dim));
  w.expanded_per_pair = static_cast<double>(mla_layers * c.num_attention_heads *
                                            (c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim));
  return w;
}

// Resets the kernel's peak-RSS mark (VmHWM) to the current RSS.
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

int prefill_curve(const std::string& dir, const std::vector<int64_t>& lengths, int threads, int64_t chunk) {
  auto m = load_k3_resident(dir, threads);
  const K3Config& c = m->config;
  const PrefillWork w = count_prefill_work(dir, c);
  const char* isa = "";
  const double peak = bench::fma_peak_gflops(threads, &isa);
  const ModelSummary& sum = m->model->summary();
  std::printf("model %s: per position %.1f M spine + %.1f M expert + %.2f M KDA multiply-adds; absorbed MLA %.0f per "
              "(query, key) pair; FMA peak %.1f GFLOP/s (%s, %d thread(s)); prefill chunk %lld\n",
              dir.c_str(), w.spine_per_position / 1e6, w.experts_per_position / 1e6, w.kda_per_position / 1e6,
              w.mla_per_pair, peak, isa, threads, static_cast<long long>(chunk));
  std::printf("(the re-expanded form would spend %.0f per pair, and so %s)\n", w.expanded_per_pair,
              w.expanded_per_pair < w.mla_per_pair ? "fewer multiply-adds in a long prefill" : "no fewer");
  std::printf("%10s %10s %12s %12s %10s %9s %10s %14s %14s %8s\n", "prompt", "TTFT s", "GFLOP", "floor s", "TTFT/floor",
              "attn %", "exp/abs", "peak RSS MB", "plan MB", "RSS/plan");
  Rng rng(11);
  for (const int64_t n : lengths) {
    std::vector<uint32_t> tokens(static_cast<size_t>(n));
    for (uint32_t& t : tokens) t = static_cast<uint32_t>(rng.below(static_cast<uint64_t>(c.vocab_size - 256)));
    std::unique_ptr<ModelSession> s = m->model->new_session();
    s->plan_length(n + 1);  // as the engine does for a prompt and its first token
    reset_peak_rss();
    const uint64_t base = current_rss_bytes();
    const int64_t group = std::min<int64_t>(n, prefill_group_rows(sum, chunk, n));
    const double plan = static_cast<double>(base + sum.session_fixed_bytes + sum.session_bytes_per_position * n +
                                            sum.pass_row_bytes * group);
    const auto t = Clock::now();
    const Rows logits = prefill(*m->model, *s, tokens, chunk);
    const double secs = std::chrono::duration<double>(Clock::now() - t).count();
    const double flops = 2 * w.macs(n);
    const double attn = w.mla_per_pair * static_cast<double>(n) * static_cast<double>(n + 1) / 2 / w.macs(n);
    const double floor_s = flops / (peak * 1e9);
    std::printf("%10lld %10.2f %12.1f %12.3f %10.1f %9.1f %10.3f %14.1f %14.1f %8.3f\n", static_cast<long long>(n), secs,
                flops / 1e9, floor_s, secs / floor_s, 100 * attn, w.expanded_macs(n) / w.macs(n),
                static_cast<double>(peak_rss_bytes()) / 1e6, plan / 1e6, static_cast<double>(peak_rss_bytes()) / plan);
    std::fflush(stdout);
    if (logits.T == 0) fail("bench_context: the prefill returned no logits");
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
  std::vector<int64_t> contexts{1024, 8192, 32768, 131072}, prefills;
  int steps = 8, threads = 1;
  int64_t chunk = kDefaultPrefillChunk;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--contexts") contexts = parse_list(v);
    else if (k == "--prefill") prefills = parse_list(v);
    else if (k == "--steps") steps = std::atoi(v.c_str());
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else if (k == "--chunk") chunk = std::atoll(v.c_str());
    else fail("bench_context: unknown option ", k);
  }
  if (!prefills.empty()) return prefill_curve(dir, prefills, threads, chunk);
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
