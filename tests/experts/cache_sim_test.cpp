// cache-sim (experts/cache_sim.h): route sequences replayed through the
// engine's cache and policies, worked by hand; Belady's optimum against an
// exhaustive search; the trace summary; the command's refusals; and the
// replay against a real streamed run of the engine, counter for counter.
#include "experts/cache_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/presets.h"
#include "io/aligned_buffer.h"
#include "model/loaders/family_loaders.h"
#include "store/setup.h"
#include "store/store_manifest.h"
#include "support/test_support.h"

namespace deltafin {
namespace cache_sim_test {

// A route trace in memory: tokens of routes, one per layer of `layers` (in
// visit order), each of k experts; `prefill_before` puts a pass of two
// positions (both rows routed like the token after it) before those tokens.
using Token = std::vector<std::vector<int64_t>>;  // [layer index] -> experts

RouteTrace trace_of(int64_t layers, int64_t experts, int64_t k, const std::vector<Token>& tokens,
                    const std::set<size_t>& prefill_before = {}) {
  RouteTrace t;
  t.layers = layers, t.experts = experts, t.top_k = k;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (prefill_before.count(i)) {
      RouteTrace::Pass p{2, {}, {}};
      for (size_t l = 0; l < tokens[i].size(); ++l)
        for (int row = 0; row < 2; ++row) {
          p.layer.push_back(static_cast<int64_t>(l));
          p.experts.insert(p.experts.end(), tokens[i][l].begin(), tokens[i][l].end());
        }
      t.passes.push_back(p);
    }
    RouteTrace::Pass p{1, {}, {}};
    for (size_t l = 0; l < tokens[i].size(); ++l) {
      p.layer.push_back(static_cast<int64_t>(l));
      p.experts.insert(p.experts.end(), tokens[i][l].begin(), tokens[i][l].end());
    }
    t.passes.push_back(p);
  }
  return t;
}

CacheReplay replay_of(const RouteTrace& t) { return make_replay({t}, {"trace"}); }

// What the cache holds after each step, as names: A = layer 0, B = layer 1.
std::vector<std::string> contents_per_step(const CacheReplay& r, CachePolicyKind kind, size_t slots,
                                           const HeatHistogram* heat, uint64_t* hits) {
  PolicyReplay p(r, kind, slots, 0, heat);
  std::vector<std::string> out;
  *hits = 0;
  for (const CacheReplay::Pass& pass : r.passes) {
    for (size_t s = pass.first; s < pass.first + pass.count; ++s) {
      *hits += p.step(r.steps[s]);
      std::string held;
      for (int64_t l = 0; l < r.layers; ++l)
        for (int64_t e = 0; e < r.experts; ++e)
          if (p.holds(l, e))
            held += (held.empty() ? "" : " ") + std::string(1, static_cast<char>('A' + l)) + std::to_string(e);
      out.push_back(held);
    }
    p.end_pass(pass.positions);
  }
  return out;
}

// Two MoE layers of 4 experts, top-2, 3 slots, no starting heat; t1..t4:
//   A{2,3} B{1,2} | A{2,3} B{2,3} | A{1,2} B{1,3} | A{0,1} B{2,3}
// Each layer: its experts enter the heat, hits are taken first, then misses
// in ascending order, each into an empty slot or over the policy's victim
// (never one of the layer's own); ticks count uses; heat decays x0.999 per token.
//
// LRU (victim: oldest tick): t1A A2, A3 into empty slots; t1B B1 empty, B2
// evicts A2 (tick 1); t2A A3 hit, A2 evicts B1 (3); t2B B2 hit, B3 evicts A3
// (5); t3A A2 hit, A1 evicts B2 (7); t3B B3 hit, B1 evicts A2 (9); t4A A1 hit,
// A0 evicts B3 (11); t4B B2 evicts B1 (12), B3 evicts A1 (13). 5 hits.
//
// frequency (victim: lowest count, then oldest): to t2B as LRU (every tie
// is a tie of counts). t3A: A2 hit; A1 evicts B3 (0.999) over B2 (1.997).
// t3B: B1 evicts A1 (1.0, against B2 1.997, A2 2.997), B3 evicts B2. t4A: A0
// evicts B1 (1.996003 < B3 1.997001), A1 evicts B3. t4B: B2 evicts A0 (1.0),
// B3 evicts A1 (1.999). 3 hits.
//
// cycle-heat (victim: lowest (h + 1) / (T + 4) / (1 + d); at a layer the
// other one is next, d = 0, its own is d = 1): to t3A as frequency (B3's p
// 1.999/7.994 < B2's 2.997/7.994). t3B (A next): B1 evicts B2 (p 0.2999 / 2 =
// 0.1499, under A1 0.2001 and A2 0.3999), B3 evicts A1. t4A: A0 evicts A2
// (0.3332 / 2 = 0.1666, under B1 0.29996, B3 0.30006), A1 evicts B1. t4B: B3
// hit, B2 evicts A0 (0.1668 against A1 0.2502). 4 hits.
//
// cycle-reuse (victim: largest D = d + 2 (1/q - 1), q = (n + 2 q0) / (V + 2),
// q0 = 2 (h + 1) / (T + 4)): to t3A as cycle-heat (ties, then B3: q 0.533
// against B2 0.867). t3B: B1 evicts A1 (D 2.790, against B2 2.434, A2 0.205),
// B3 evicts B2: the same slots as cycle-heat, in the other order. t4A: A0
// evicts A2 (D 2.087, against B1 1.122, B3 0.924), A1 evicts B1. t4B: B2
// evicts A0 (D 3.679 against A1 1.442). 4 hits.
//
// Belady (evict the furthest next demand): 6 hits (t2A A2, t2B B2, t3A A2,
// t3B B3, t4A A1, t4B B3), one more than LRU's best here.
TEST(CacheSim, ScriptedRoutesThroughEveryPolicyAsWorkedByHand) {
  const CacheReplay r =
      replay_of(trace_of(2, 4, 2, {{{2, 3}, {1, 2}}, {{2, 3}, {2, 3}}, {{1, 2}, {1, 3}}, {{0, 1}, {2, 3}}}));
  uint64_t hits = 0;
  EXPECT_EQ(contents_per_step(r, CachePolicyKind::Lru, 3, nullptr, &hits),
            (std::vector<std::string>{"A2 A3", "A3 B1 B2", "A2 A3 B2", "A2 B2 B3", "A1 A2 B3", "A1 B1 B3", "A0 A1 B1",
                                      "A0 B2 B3"}));
  EXPECT_EQ(hits, 5u);
  EXPECT_EQ(contents_per_step(r, CachePolicyKind::Frequency, 3, nullptr, &hits),
            (std::vector<std::string>{"A2 A3", "A3 B1 B2", "A2 A3 B2", "A2 B2 B3", "A1 A2 B2", "A2 B1 B3", "A0 A1 A2",
                                      "A2 B2 B3"}));
  EXPECT_EQ(hits, 3u);
  const std::vector<std::string> cycle{"A2 A3", "A3 B1 B2", "A2 A3 B2", "A2 B2 B3", "A1 A2 B2", "A2 B1 B3", "A0 A1 B3",
                                       "A1 B2 B3"};
  EXPECT_EQ(contents_per_step(r, CachePolicyKind::CycleHeat, 3, nullptr, &hits), cycle);
  EXPECT_EQ(hits, 4u);
  EXPECT_EQ(contents_per_step(r, CachePolicyKind::CycleReuse, 3, nullptr, &hits), cycle);
  EXPECT_EQ(hits, 4u);
  const CacheSimRow b = simulate_belady(r, 3, 0, false);
  EXPECT_EQ(b.hits, 6u);
  EXPECT_EQ(b.demanded, 16u);
  // simulate() gives the same counts per policy, each size's rows ending with Belady's.
  CacheSimOptions o;
  o.slots = {3};
  o.policies = {CachePolicyKind::Lru, CachePolicyKind::Frequency, CachePolicyKind::CycleHeat,
                CachePolicyKind::CycleReuse};
  o.threads = 2;
  const std::vector<CacheSimRow> rows = simulate(r, o);
  ASSERT_EQ(rows.size(), 5u);
  const std::vector<std::pair<std::string, uint64_t>> want{
      {"lru", 5}, {"frequency", 3}, {"cycle-heat", 4}, {"cycle-reuse", 4}, {"belady", 6}};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].policy, want[i].first);
    EXPECT_EQ(rows[i].hits, want[i].second) << want[i].first;
    EXPECT_EQ(rows[i].demanded, 16u);
    EXPECT_EQ(rows[i].slots, 3u);
  }
}

// Held-out heat: learned from three tokens of A{0,1} B{0,1} (each count
// (1 x 0.999 + 1) x 0.999 + 1) x 0.999 = 2.994004), then frequency on
//   t1 A{0,1} B{2,3} | t2 A{2,3} B{0,1} | t3 A{0,1} B{2,3}, 3 slots.
// Without it: t1B B3 evicts A0 (counts 1, 1: the older), t2A A2 evicts A1
// (0.999, the oldest of three), A3 evicts B2; t2B B0 evicts B3, B1 evicts A2;
// t3A A0 evicts A3, A1 evicts B0: no hit at all. With it: t1B still evicts
// A0 (both hot), but t2A A2 evicts B2 and A3 evicts B3 (0.999 against A1's
// 3.99): A1 stays; t2B B0 evicts A2, B1 evicts A3; t3A A1 hits.
TEST(CacheSim, HeldOutHeatChangesWhatFrequencyKeeps) {
  const CacheReplay train = replay_of(trace_of(2, 4, 2, {{{0, 1}, {0, 1}}, {{0, 1}, {0, 1}}, {{0, 1}, {0, 1}}}));
  const HeatHistogram heat = learn_heat(train);
  EXPECT_NEAR(heat.at(0, 0), 2.994003999, 1e-12);
  EXPECT_NEAR(heat.at(1, 1), 2.994003999, 1e-12);
  EXPECT_EQ(heat.at(0, 2), 0.0);
  const CacheReplay r = replay_of(trace_of(2, 4, 2, {{{0, 1}, {2, 3}}, {{2, 3}, {0, 1}}, {{0, 1}, {2, 3}}}));
  uint64_t cold = 0, warm = 0;
  const std::vector<std::string> without = contents_per_step(r, CachePolicyKind::Frequency, 3, nullptr, &cold);
  const std::vector<std::string> with = contents_per_step(r, CachePolicyKind::Frequency, 3, &heat, &warm);
  EXPECT_EQ(without[2], "A2 A3 B3");
  EXPECT_EQ(with[2], "A1 A2 A3");
  EXPECT_EQ(without[4], "A0 A1 B1");
  EXPECT_EQ(with[4], "A0 A1 B1");
  EXPECT_EQ(cold, 0u);
  EXPECT_EQ(warm, 1u);
  // The pinned tier comes from the same heat: 1 of 3 slots pinned holds A0
  // (the hottest, lowest key of the tie), a hit at t3A, and leaves 2 to evict.
  const CacheSimRow pinned = simulate_policy(r, CachePolicyKind::Frequency, 3, 1, &heat, false);
  EXPECT_EQ(pinned.pinned, 1u);
  EXPECT_EQ(pinned.hits, 2u);  // A0 at t1A and t3A
}

// The best number of hits any eviction choice can get, by exhaustive search
// over the resident sets (small banks: a set is a bit mask), with the same
// rule that a layer's experts are all resident while it is computed.
uint64_t optimum(const CacheReplay& r, size_t slots) {
  std::map<uint64_t, uint64_t> best{{0, 0}};  // resident set -> most hits so far
  for (const CacheReplay::Pass& p : r.passes) {
    if (!r.decode(p)) continue;
    for (size_t s = p.first; s < p.first + p.count; ++s) {
      const CacheReplay::Step& st = r.steps[s];
      uint64_t need = 0;
      for (size_t i = st.first; i < st.first + st.count; ++i) need |= 1ull << (st.layer * r.experts + r.demands[i]);
      std::map<uint64_t, uint64_t> next;
      for (const auto& [set, hits] : best) {
        const uint64_t h = hits + static_cast<uint64_t>(__builtin_popcountll(set & need));
        const uint64_t others = set & ~need;
        const int keep = static_cast<int>(slots) - __builtin_popcountll(need);
        // Keep any `keep` (or all) of the others.
        for (uint64_t sub = others;; sub = (sub - 1) & others) {
          if (__builtin_popcountll(sub) == std::min(keep, __builtin_popcountll(others))) {
            uint64_t& v = next[sub | need];
            v = std::max(v, h);
          }
          if (sub == 0) break;
        }
      }
      best.swap(next);
    }
  }
  uint64_t most = 0;
  for (const auto& [set, hits] : best) most = std::max(most, hits);
  return most;
}

// Belady's rule is the optimum (equal to the search), so every policy is at
// or below it, on random routes of 2 or 3 layers x 4 experts, top-2, caches
// of 2 to 6 slots, with and without a pinned tier (Belady then may start
// with as many experts of its choice).
TEST(CacheSim, BeladyIsTheOptimumAndBoundsEveryPolicy) {
  std::mt19937 rng(7);
  for (int round = 0; round < 60; ++round) {
    const int64_t layers = 2 + round % 2;
    std::vector<Token> tokens(6 + static_cast<size_t>(round % 5));
    for (Token& t : tokens)
      for (int64_t l = 0; l < layers; ++l) {
        std::vector<int64_t> e{0, 1, 2, 3};
        std::shuffle(e.begin(), e.end(), rng);
        t.push_back({e[0], e[1]});
      }
    const CacheReplay r = replay_of(trace_of(layers, 4, 2, tokens));
    const size_t slots = 2 + static_cast<size_t>(round % 5);
    const CacheSimRow b = simulate_belady(r, slots, 0, false);
    EXPECT_EQ(b.hits, optimum(r, slots)) << "round " << round;
    const HeatHistogram heat = learn_heat(r);
    for (CachePolicyKind kind : {CachePolicyKind::Lru, CachePolicyKind::Frequency, CachePolicyKind::CycleHeat,
                                 CachePolicyKind::CycleReuse}) {
      EXPECT_LE(simulate_policy(r, kind, slots, 0, nullptr, false).hits, b.hits) << "round " << round;
      if (slots >= 4) {
        EXPECT_LE(simulate_policy(r, kind, slots, 1, &heat, false).hits, simulate_belady(r, slots, 1, false).hits)
            << "round " << round;
      }
    }
  }
}

// Coverage and temporal reuse, by hand. Two layers of 4 experts, top-2:
//   t1 A{0,1} B{0,1} | t2 A{0,2} B{0,1} | (a prefill pass) | t3 A{0,1} B{2,3}
// A's decode counts 3, 2, 1, 0 of 6: 50 % (3) by 1 expert of 4, 80 % (4.8)
// by 2, 90 % and 95 % by 3. B's 2, 2, 1, 1: 50 % by 2, 80 % by 3, 90 % and
// 95 % by all 4. Reuse: only t1 -> t2 is a pair (the prefill breaks t2 ->
// t3): A 1 of 2, B 2 of 2.
TEST(CacheSim, SummaryCoverageAndReuseAsWorkedByHand) {
  const CacheReplay r = replay_of(trace_of(2, 4, 2, {{{0, 1}, {0, 1}}, {{0, 2}, {0, 1}}, {{0, 1}, {2, 3}}}, {2}));
  const RouteTraceSummary t = summarize(r);
  EXPECT_EQ(t.decode_tokens, 3);
  EXPECT_EQ(t.prefill_passes, 1);
  EXPECT_EQ(t.prefill_positions, 2);
  EXPECT_EQ(t.moe_layers, 2);
  ASSERT_EQ(t.layers.size(), 2u);
  const double a[4] = {0.25, 0.5, 0.75, 0.75}, b[4] = {0.5, 0.75, 1.0, 1.0};
  for (int q = 0; q < 4; ++q) {
    EXPECT_DOUBLE_EQ(t.layers[0].coverage[q], a[q]) << q;
    EXPECT_DOUBLE_EQ(t.layers[1].coverage[q], b[q]) << q;
  }
  EXPECT_DOUBLE_EQ(t.layers[0].reuse, 0.5);
  EXPECT_DOUBLE_EQ(t.layers[1].reuse, 1.0);
  // The prefill pass is one step per layer (its rows' union), replayed only when asked.
  EXPECT_EQ(r.passes[2].positions, 2);
  EXPECT_EQ(r.steps[r.passes[2].first].count, 2u);
  const CacheSimRow decode_only = simulate_policy(r, CachePolicyKind::Lru, 8, 0, nullptr, false);
  const CacheSimRow with_prefill = simulate_policy(r, CachePolicyKind::Lru, 8, 0, nullptr, true);
  EXPECT_EQ(decode_only.demanded, 12u);
  EXPECT_EQ(decode_only.prefill_demanded, 0u);
  EXPECT_EQ(with_prefill.prefill_demanded, 4u);
  // 8 slots hold the whole bank: decode misses only first uses (A0 A1 B0 B1
  // at t1, A2 at t2, B2 B3 at the prefill when replayed, else at t3).
  EXPECT_EQ(decode_only.hits, 12u - 7u);
  EXPECT_EQ(with_prefill.hits, 12u - 5u);
  EXPECT_EQ(with_prefill.prefill_hits, 2u);  // A0 A1
}

TEST(CacheSim, BadSizesAndTracesAreRefusedByName) {
  const CacheReplay r = replay_of(trace_of(2, 4, 2, {{{0, 1}, {0, 1}}}));
  test::expect_error([&] { check_cache_size(r, 1, 0, "--slots 1"); },
                     {"--slots 1: 1 slots cannot hold one layer's 2 experts", "give at least 2"});
  test::expect_error([&] { check_cache_size(r, 3, 0.5, "--slots 3"); },
                     {"--slots 3: 2 of its 3 slots pinned (--pinned-fraction 0.5) leave 1, fewer than one layer's 2"});
  RouteTrace prompt_only;
  prompt_only.layers = 2, prompt_only.experts = 4, prompt_only.top_k = 2;
  prompt_only.passes.push_back({3, {0, 0, 0, 1, 1, 1}, {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}});
  test::expect_error([&] { require_decode(replay_of(prompt_only), "p.txt"); }, {"p.txt: no decode passes"});
  RouteTrace other = prompt_only;
  other.experts = 8;
  test::expect_error([&] { make_replay({prompt_only, other}, {"a.txt", "b.txt"}); },
                     {"b.txt: layers=2 experts=8 top_k=2, but a.txt has layers=2 experts=4"});
}

// The command: its table and its refusals, each naming what was wrong.
TEST(CacheSim, TheCommandPrintsTheTableAndRefusesBadInput) {
  test::TempDir tmp;
  const std::string trace = tmp.file("t.txt"), prompt = tmp.file("p.txt");
  test::write_bytes(trace,
                    "deltafin-route-trace 1 layers=2 experts=4 top_k=2\n"
                    "P 1\nR 0 2 3\nR 1 1 2\nP 1\nR 0 2 3\nR 1 2 3\nP 1\nR 0 1 2\nR 1 1 3\nP 1\nR 0 0 1\nR 1 2 3\n");
  test::write_bytes(prompt,
                    "deltafin-route-trace 1 layers=2 experts=4 top_k=2\nP 2\nR 0 0 1\nR 0 0 2\nR 1 0 1\nR 1 1 2\n");
  std::string out;
  const std::string json = tmp.file("o.json");
  ASSERT_EQ(test::run_command(test::df("cache-sim " + trace + " --slots 3 --json " + json), &out), 0) << out;
  // The scripted case above: LRU 5 of 16 hits (31.25 %), Belady 6 (37.50 %).
  EXPECT_NE(out.find("4 decode tokens; 2 MoE layers x 4 experts, top-k 2; bank 8 experts"), std::string::npos) << out;
  EXPECT_NE(out.find("       3       0  lru            31.25           2.8         6.25"), std::string::npos) << out;
  EXPECT_NE(out.find("       3       0  belady         37.50           2.5            -"), std::string::npos) << out;
  EXPECT_NE(test::read_bytes(json).find("\"policy\": \"cycle-reuse\""), std::string::npos);
  const std::vector<std::pair<std::string, std::string>> refused{
      {trace + " --slots 1", "--slots 1: 1 slots cannot hold one layer's 2 experts"},
      {trace + " --fractions 0.1", "--fractions 0.1 (1 of the bank's 8 experts): 1 slots cannot hold"},
      {trace + " --slots 3,x", "--slots: \"x\" is not a whole number of slots above 0"},
      {trace + " --slots 4 --policies lru,belady", "--policies: \"belady\" is not a cache policy"},
      {trace + " --slots 4 --pinned-fraction 0.25", "--pinned-fraction: the pinned tier is filled from the heat"},
      {trace, "give exactly one of --slots or --fractions"},
      {prompt + " --slots 4", prompt + ": no decode passes"},
  };
  for (const auto& [args, message] : refused) {
    EXPECT_NE(test::run_command(test::df("cache-sim " + args), &out), 0) << args;
    EXPECT_NE(out.find(message), std::string::npos) << args << ":\n" << out;
  }
}

// The replay is the engine: a tiny K3 store run streamed (no lookahead; 16
// slots, fewer than a token's 36 experts over 9 MoE layers), a 4-token
// prefill pass then 10 decoded tokens, with each policy; its route trace
// replayed by cache-sim with the run's slot count gives the run's own hit
// and demand counters, prompt and decode apart. (The prompt's layers each
// fit in the cache: a wider one makes the engine claim slots as reads land,
// in an order the replay, where reads land at once, cannot know.)
TEST(CacheSim, ReplayCountsWhatTheEngineCounted) {
  test::TempDir root;
  GenerateOptions g;
  g.out_dir = root.file("ckpt");
  g.seed = 35;
  g.dims = preset_dims("tiny");
  g.progress = false;
  generate_k3_checkpoint(g);
  SetupOptions s;
  s.from = g.out_dir;
  s.store = root.file("store");
  s.drives = {root.file("drive")};
  std::filesystem::create_directories(s.drives[0]);
  s.drive_mbps = {1000.0};
  s.spine = "bf16";
  s.quiet = true;
  run_setup(s);
  const uint64_t record = load_store_manifest(s.store).expert_bytes;
  const std::vector<uint32_t> prompt = test::random_tokens(35, 4, 768), more = test::random_tokens(36, 10, 768);
  for (const std::string& policy : cache_policy_names()) {
    const std::string path = root.file("routes-" + policy + ".txt");
    EngineOptions o;
    o.cache_gb = (16.0 * static_cast<double>(round_up_direct(record)) + 1) / 1e9;
    o.lookahead = LookaheadMode::Off;
    o.reader.io = "pread";
    o.reader.direct = false;
    o.save_heat = false;
    o.cache_policy = policy;
    StreamCounters after_prompt, end;
    size_t slots = 0;
    double engine_reused = -1, engine_routed = -1;
    {
      auto m = load_store(s.store, o);
      m->open_route_trace(path);
      slots = m->memory.cache_slots;
      CausalModel& model = m->causal();
      std::unique_ptr<ModelSession> session = model.new_session();
      model.forward(*session, prompt, false);
      after_prompt = m->stream->counters();
      for (uint32_t id : more) model.forward(*session, std::span<const uint32_t>(&id, 1), false);
      end = m->stream->counters();
      engine_reused = m->heat->reused();
      engine_routed = m->heat->routed();
    }
    ASSERT_EQ(slots, 16u);
    EXPECT_EQ(end.inflight, 0u);
    const CacheReplay r = make_replay({read_route_trace(path)}, {path});
    size_t widest = 0;  // the prompt's widest layer
    for (size_t st = r.passes[0].first; st < r.passes[0].first + r.passes[0].count; ++st)
      widest = std::max(widest, r.steps[st].count);
    ASSERT_LE(widest, slots);
    const CacheSimRow row = simulate_policy(r, parse_cache_policy(policy, "test"), slots, 0, nullptr, true);
    EXPECT_EQ(row.prefill_demanded, after_prompt.demanded) << policy;
    EXPECT_EQ(row.prefill_hits, after_prompt.hits) << policy;
    EXPECT_EQ(row.demanded, end.demanded - after_prompt.demanded) << policy;
    EXPECT_EQ(row.hits, end.hits - after_prompt.hits) << policy;
    EXPECT_GT(end.misses, after_prompt.misses) << policy << ": the decoded tokens missed too";
    // The temporal reuse --cache-policy auto reads: the engine measured what
    // the trace's heat says (9 token pairs after the prompt; the prompt breaks the chain).
    const HeatHistogram learned = learn_heat(r);
    EXPECT_EQ(learned.routed(), engine_routed) << policy;
    EXPECT_EQ(learned.reused(), engine_reused) << policy;
    EXPECT_GT(engine_routed, 0) << policy;
  }
}

}  // namespace cache_sim_test
}  // namespace deltafin
