// Exactness of streamed runs (design.md §5.3): logits from a store, with any
// cache budget, drive count, lookahead mode, I/O engine and thread count, are
// bit-identical to the all-resident run of the same checkpoint, for every
// family (Kimi K3; Qwen3-MoE with a dense layer between its MoE layers). And
// faults: a damaged expert is never used; with a replica the run goes on unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "model/kimi_k3/load/loaded_k3.h"
#include "model/loaders/family_loaders.h"
#include "io/aligned_buffer.h"
#include "model/deepseek_v3/generator.h"
#include "model/kimi_k3/generator.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "experts/route_trace.h"
#include "store/heat.h"
#include "store/setup.h"
#include "store/spine_file.h"
#include "store/store_manifest.h"
#include "support/reader_capability.h"
#include "support/store_damage.h"
#include "support/test_support.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

// Logits of every position: one pass over all (prefill), or one token per pass (decode).
std::vector<float> logits_of(K3Model& model, const std::vector<uint32_t>& ids, bool decode) {
  K3Session s(model.config());
  std::vector<float> out;
  if (!decode) {
    Rows r = model.forward(s, ids, true);
    return r.v;
  }
  for (uint32_t id : ids) {
    const uint32_t one[1] = {id};
    Rows r = model.forward(s, one, true);
    out.insert(out.end(), r.v.begin(), r.v.end());
  }
  return out;
}

// The same through the family interface, for any loaded model.
std::vector<float> logits_of(LoadedModel& m, const std::vector<uint32_t>& ids, bool decode) {
  CausalModel& model = m.causal();
  std::unique_ptr<ModelSession> s = model.new_session();
  if (!decode) return model.forward(*s, ids, true).v;
  std::vector<float> out;
  for (uint32_t id : ids) {
    Rows r = model.forward(*s, std::span<const uint32_t>(&id, 1), true);
    out.insert(out.end(), r.v.begin(), r.v.end());
  }
  return out;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A generated checkpoint, its resident logits, and stores over 1..3 drives.
struct World {
  test::TempDir root;
  std::string family, ckpt;
  ModelSummary summary;
  std::vector<uint32_t> ids;
  std::vector<float> prefill, decode;
  std::map<std::string, std::string> stores;  // name -> store dir

  World(const std::string& family_name, const std::string& preset, size_t n_tokens) : family(family_name) {
    ckpt = root.path() + "/ckpt";
    if (family == "kimi_k3") {
      GenerateOptions o;
      o.out_dir = ckpt;
      o.seed = 21;
      o.dims = preset_dims(preset);
      o.progress = false;
      generate_k3_checkpoint(o);
    } else if (family == "deepseek_v3") {
      DeepseekV3GenerateOptions o;  // FP8 experts and spine, grouped routing
      o.out_dir = ckpt;
      o.seed = 21;
      o.dims = deepseek_v3_preset(preset, DeepseekV3Flavor::DeepseekV3);
      o.progress = false;
      generate_deepseek_v3_checkpoint(o);
    } else {
      Qwen3MoeGenerateOptions o;
      o.out_dir = ckpt;
      o.seed = 21;
      o.dims = qwen3_moe_preset(preset);
      o.dims.layers = 4, o.dims.mlp_only_layers = {1};  // MoE layers 0, 2, 3: not contiguous
      generate_qwen3_moe_checkpoint(o);
    }
    auto m = load_resident(ckpt, 1);
    summary = m->summary();
    ids = test::random_tokens(4, n_tokens, static_cast<uint32_t>(summary.vocab));
    prefill = logits_of(*m, ids, false);
    decode = logits_of(*m, ids, true);
  }

  // A store over `drives` directories; replicate: every expert on two drives.
  std::string store(int drives, bool replicate = false, const std::string& layout = "auto") {
    const std::string name = std::to_string(drives) + (replicate ? "r" : "") + (layout == "striped" ? "s" : "");
    auto it = stores.find(name);
    if (it != stores.end()) return it->second;
    SetupOptions s;
    s.from = ckpt;
    s.store = root.path() + "/store" + name;
    for (int d = 0; d < drives; ++d) {
      s.drives.push_back(root.path() + "/drive" + name + "_" + std::to_string(d));
      fs::create_directories(s.drives.back());
      s.drive_mbps.push_back(1000.0);
    }
    s.spine = "bf16";
    s.quiet = true;
    s.layout = layout;
    if (replicate) {
      // Replication follows the heat histogram: make every expert warm.
      HeatHistogram h(summary.layers, summary.experts);
      for (int64_t l : summary.moe_layers)
        for (int64_t e = 0; e < summary.experts; ++e) h.add(l, e, 1.0 + static_cast<double>(e));
      fs::create_directories(s.store);
      h.save(s.store);
      s.replicate_hot = static_cast<int64_t>(summary.moe_layers.size()) * summary.experts;
    }
    run_setup(s);
    return stores[name] = s.store;
  }
};

World& tiny() {
  static World w("kimi_k3", "tiny", 12);
  return w;
}

World& tiny_deepseek_v3() {
  static World w("deepseek_v3", "tiny", 12);
  return w;
}

World& tiny_qwen3_moe() {
  static World w("qwen3_moe", "tiny", 12);
  return w;
}

struct Case {
  std::string family;
  int drives;
  double cache_gb;  // < 0: everything; 0: the working set only
  LookaheadMode lookahead;
  IoEngine io;
  int threads;
  bool replicate = false;       // every expert on two drives (whole layout)
  std::string layout = "auto";  // or "striped"
};

std::string case_name(const Case& c) {
  return c.family + "_drives" + std::to_string(c.drives) + "_cache" +
         (c.cache_gb < 0 ? std::string("all") : c.cache_gb == 0 ? std::string("none") : std::string("small")) + "_" +
         lookahead_mode_name(c.lookahead) + "_" + io_engine_name(c.io) + "_t" + std::to_string(c.threads) +
         (c.replicate ? "_replicated" : "") + (c.layout == "striped" ? "_striped" : "");
}

EngineOptions engine_options(const Case& c) {
  EngineOptions o;
  o.threads = c.threads;
  o.cache_gb = c.cache_gb < 0 ? 1.0 : c.cache_gb;
  o.lookahead = c.lookahead;
  o.reader.io = io_engine_name(c.io);
  o.reader.queue_depth = 2;
  o.reader.chunk_bytes = 8192;  // several chunks per tiny expert (they are ~2-3 KiB... or more)
  o.save_heat = false;
  return o;
}

class StreamedExactness : public ::testing::TestWithParam<Case> {};

TEST_P(StreamedExactness, LogitsBitIdenticalToResident) {
  const Case& c = GetParam();
  // The case's engine, with direct reads: exactness on another is not what it claims.
  std::string why;
  const std::string missing = test::missing_for_reader(c.io, &why);
  REQUIRE_CAPABILITY(missing, missing.empty(), why);
  World& w = c.family == "kimi_k3" ? tiny() : c.family == "deepseek_v3" ? tiny_deepseek_v3() : tiny_qwen3_moe();
  const std::string store = w.store(c.drives, c.replicate, c.layout);
  EngineOptions o = engine_options(c);
  if (c.cache_gb > 0) o.cache_gb = 3.0 * static_cast<double>(load_store_manifest(store).expert_bytes) / 1e9 * 4;
  auto m = load_store(store, o);
  EXPECT_EQ(m->family->name, c.family);
  test::expect_reader_as_asked(m->stream->reader(), c.io);
  EXPECT_TRUE(bit_identical(logits_of(*m, w.ids, true), w.decode)) << "decode";
  EXPECT_TRUE(bit_identical(logits_of(*m, w.ids, false), w.prefill)) << "prefill";
  // Every demanded expert was a hit, a read, or a prefetch caught in flight.
  StreamCounters k = m->stream->counters();
  EXPECT_EQ(k.hits + k.misses + k.inflight, k.demanded);
  EXPECT_GT(k.demanded, 0u);
  EXPECT_EQ(k.bytes_read % m->manifest->expert_bytes, 0u);
  EXPECT_GE(k.bytes_read, k.misses * m->manifest->expert_bytes);
  if (c.cache_gb < 0) {
    EXPECT_GT(k.hits, 0u);  // the second pass reuses what the first read
  }
}

// Every value of every knob appears, mixed with the others.
INSTANTIATE_TEST_SUITE_P(
    Knobs, StreamedExactness,
    ::testing::Values(Case{"kimi_k3", 1, 0, LookaheadMode::Off, IoEngine::Pread, 1}, Case{"kimi_k3", 1, -1, LookaheadMode::On, IoEngine::Uring, 2},
                      Case{"kimi_k3", 1, 1, LookaheadMode::Auto, IoEngine::Uring, 1}, Case{"kimi_k3", 2, 0, LookaheadMode::On, IoEngine::Uring, 1},
                      Case{"kimi_k3", 2, 1, LookaheadMode::Off, IoEngine::Pread, 2}, Case{"kimi_k3", 2, -1, LookaheadMode::Auto, IoEngine::Pread, 1},
                      Case{"kimi_k3", 3, 0, LookaheadMode::Auto, IoEngine::Uring, 2}, Case{"kimi_k3", 3, 1, LookaheadMode::On, IoEngine::Pread, 1},
                      Case{"kimi_k3", 3, -1, LookaheadMode::Off, IoEngine::Uring, 1}, Case{"kimi_k3", 3, 0, LookaheadMode::On, IoEngine::Pread, 2},
                      // Qwen3-MoE (no route lookahead: auto means off): whole, striped and replicated stores.
                      Case{"qwen3_moe", 1, 0, LookaheadMode::Off, IoEngine::Pread, 1},
                      Case{"qwen3_moe", 2, 1, LookaheadMode::Auto, IoEngine::Uring, 2},
                      Case{"qwen3_moe", 2, -1, LookaheadMode::Off, IoEngine::Uring, 1, false, "striped"},
                      Case{"qwen3_moe", 3, 0, LookaheadMode::Off, IoEngine::Pread, 2, false, "striped"},
                      Case{"qwen3_moe", 2, 0, LookaheadMode::Off, IoEngine::Uring, 1, true},
                      // The DeepSeek-V3 family (FP8 records with their block scales): whole and striped.
                      Case{"deepseek_v3", 1, 0, LookaheadMode::Off, IoEngine::Uring, 2},
                      Case{"deepseek_v3", 2, 1, LookaheadMode::Off, IoEngine::Pread, 1, false, "striped"}),
    [](const ::testing::TestParamInfo<Case>& i) { return case_name(i.param); });

// The small preset routes 16 of 64 experts: a 9-token prefill needs more
// experts per layer than a working-set-only cache holds, so the engine must
// stream them through in windows.
TEST(StreamedExactnessSmall, PrefillLargerThanTheCache) {
  static World w("kimi_k3", "small", 9);
  const std::string store = w.store(2);
  for (LookaheadMode la : {LookaheadMode::Off, LookaheadMode::On}) {
    EngineOptions o = engine_options(Case{"kimi_k3", 2, 0, la, IoEngine::Uring, 2});
    auto m = load_k3_store(store, o);
    EXPECT_LT(m->memory.cache_slots, 64u);
    EXPECT_TRUE(bit_identical(logits_of(*m, w.ids, false), w.prefill)) << lookahead_mode_name(la);
    EXPECT_TRUE(bit_identical(logits_of(*m, w.ids, true), w.decode)) << lookahead_mode_name(la);
  }
}

// Faults ---------------------------------------------------------------------

using test::StoreCopy;
using test::flip_byte;
using test::remove_file;
using test::truncate_file;

std::vector<float> run_store(const std::string& store, const std::vector<uint32_t>& ids) {
  auto m = load_k3_store(store, engine_options(Case{"kimi_k3", 1, 0, LookaheadMode::Off, IoEngine::Pread, 1}));
  return logits_of(*m, ids, true);
}

TEST(StreamedFaults, TruncatedExpertWithoutReplicaStopsNamingIt) {
  World& w = tiny();
  StoreCopy s(w.store(2));
  s.damage_layer1_primaries(truncate_file);
  EXPECT_FAILS_WITH(run_store(s.store, w.ids), "layer 1 expert", "deltafin-experts/L001/E", "drive");
}

TEST(StreamedFaults, CorruptedByteWithoutReplicaIsNeverUsed) {
  World& w = tiny();
  StoreCopy s(w.store(2));
  s.damage_layer1_primaries(flip_byte);
  EXPECT_FAILS_WITH(run_store(s.store, w.ids), "layer 1 expert", "CRC");
}

TEST(StreamedFaults, MissingDriveStopsNamingThePath) {
  World& w = tiny();
  StoreCopy s(w.store(2));
  fs::remove_all(s.m.drives[1].path);
  EXPECT_FAILS_WITH(run_store(s.store, w.ids), s.m.drives[1].path, "expert");
}

TEST(StreamedFaults, ReplicaServesWhenThePrimaryIsDamaged) {
  World& w = tiny();
  for (auto damage : {truncate_file, flip_byte}) {
    StoreCopy s(w.store(2, true));
    ASSERT_EQ(s.m.entry(1, 0).drives.size(), 2u) << "setup replicated every expert";
    s.damage_layer1_primaries(damage);
    EXPECT_TRUE(bit_identical(run_store(s.store, w.ids), w.decode));
  }
  StoreCopy s(w.store(2, true));
  fs::remove_all(s.m.drives[0].path);  // a whole drive gone: every expert has its other copy
  EXPECT_TRUE(bit_identical(run_store(s.store, w.ids), w.decode));
}

TEST(StreamedHeat, RunsUpdateAndPersistTheHeatHistogram) {
  World& w = tiny();
  StoreCopy s(w.store(1));
  EngineOptions o = engine_options(Case{"kimi_k3", 1, 0, LookaheadMode::Off, IoEngine::Pread, 1});
  {
    auto m = load_k3_store(s.store, o);
    logits_of(*m, w.ids, true);
    m->save_heat();
  }
  HeatHistogram h = HeatHistogram::load(s.store, s.m.layers, s.m.experts);
  K3Config c = load_k3_config(s.store + "/config.json");
  // 12 tokens x 9 MoE layers x 4 experts, decayed by at most 0.999^12.
  const double uses = 12.0 * (c.num_hidden_layers - 1) * c.num_experts_per_token;
  EXPECT_LE(h.total(), uses);
  EXPECT_GT(h.total(), uses * 0.98);
  EXPECT_EQ(h.at(0, 0), 0.0);  // layer 0 is dense: never routed
}

// An int8-row spine (k3-model.md §5.2) is the one non-exact mode: it is
// announced, differs from BF16, and streaming it changes nothing either: the
// streamed run equals a run of the same int8 spine with every expert in RAM.
TEST(StreamedInt8Spine, AnnouncedAndStreamedBitIdenticalToResidentInt8) {
  World& w = tiny();
  test::TempDir dir;
  SetupOptions s;
  s.from = w.ckpt;
  s.store = dir.path() + "/store";
  s.drives = {dir.path() + "/d0", dir.path() + "/d1"};
  for (const std::string& d : s.drives) fs::create_directories(d);
  s.drive_mbps = {1000.0, 1000.0};
  s.spine = "int8";
  s.quiet = true;
  run_setup(s);
  auto m = load_k3_store(s.store, engine_options(Case{"kimi_k3", 2, 0, LookaheadMode::On, IoEngine::Uring, 1}));
  EXPECT_EQ(m->spine_format, "int8-row");
  EXPECT_FALSE(m->info().weight_exact());  // the warning it makes: tests/bench/run_report_test.cpp
  std::vector<float> streamed = logits_of(*m, w.ids, true);
  EXPECT_FALSE(bit_identical(streamed, w.decode)) << "int8-row weights cannot give the BF16 logits";

  K3Checkpoint ck = load_k3_checkpoint(w.ckpt);
  StoreManifest man = load_store_manifest(s.store);
  K3Weights weights = load_k3_weights(ck.config, *open_store_spine(s.store, man));
  std::unique_ptr<ResidentExpertSource> experts = load_resident_k3_experts(ck);
  K3Model resident(ck.config, weights, *experts, nullptr);
  EXPECT_TRUE(bit_identical(streamed, logits_of(resident, w.ids, true)));
}

TEST(StreamedHeat, PinnedTierIsWarmedFromTheHeatHistogram) {
  World& w = tiny();
  StoreCopy s(w.store(1));
  K3Config c = load_k3_config(s.store + "/config.json");
  // Heat: layer 1's experts 0..3 are the hottest of all.
  HeatHistogram h(c.num_hidden_layers, c.num_experts);
  for (int64_t e = 0; e < 4; ++e) h.add(1, e, 100.0);
  h.add(2, 5, 1.0);
  h.save(s.store);
  EngineOptions o = engine_options(Case{"kimi_k3", 1, 0, LookaheadMode::Off, IoEngine::Pread, 1});
  o.pin_gb = 4.5 * static_cast<double>(round_up_direct(s.m.expert_bytes)) / 1e9;  // room for 4 slots
  auto m = load_k3_store(s.store, o);
  EXPECT_EQ(m->memory.pinned_slots, 4u);
  // Demand each pinned expert: it comes from the pinned tier (already read or
  // being read), never from a new demand read, and the bytes are the released ones.
  K3Checkpoint ck = load_k3_checkpoint(w.ckpt);
  for (int64_t e = 0; e < 4; ++e) {
    const uint64_t misses = m->stream->counters().misses;
    ExpertHandle hnd = m->stream->get(1, e);
    EXPECT_EQ(m->stream->counters().misses, misses) << e;
    std::vector<uint8_t> want = ck.read_expert_record(1, e);
    EXPECT_EQ(std::memcmp(hnd.data, want.data(), want.size()), 0) << e;
  }
  EXPECT_TRUE(bit_identical(logits_of(*m, w.ids, true), w.decode));
}

}  // namespace

namespace {
// Every route of a trace, as text lines "layer e0 e1 ...", and each pass's size.
std::vector<std::string> route_lines(const RouteTrace& t, std::vector<int64_t>* positions) {
  std::vector<std::string> out;
  for (const RouteTrace::Pass& p : t.passes) {
    positions->push_back(p.positions);
    for (size_t r = 0; r < p.layer.size(); ++r) {
      std::string line = std::to_string(p.layer[r]);
      for (int64_t k = 0; k < t.top_k; ++k) line += " " + std::to_string(p.experts[r * t.top_k + k]);
      out.push_back(line);
    }
  }
  return out;
}
}  // namespace

// A route trace holds what the model routed, pass by pass, and a streamed run
// (through a small cache, so misses and evictions happen) writes the same one
// as the resident run.
TEST(RouteTrace, HoldsTheModelsRoutesAndIsTheSameStreamedAsResident) {
  World& w = tiny();
  const std::string resident_path = w.root.path() + "/routes-resident.txt";
  const std::string streamed_path = w.root.path() + "/routes-streamed.txt";
  std::vector<std::string> last;  // the resident model's routes of its last (decode) pass
  {
    auto m = load_resident(w.ckpt, 1);
    m->open_route_trace(resident_path);
    logits_of(*m, w.ids, false);  // one prefill pass over every token
    logits_of(*m, w.ids, true);   // then one pass per token
    for (int64_t l : w.summary.moe_layers) {
      const Route& r = m->causal().last_routes()[static_cast<size_t>(l)].at(0);
      std::string line = std::to_string(l);
      for (int64_t e : r.experts) line += " " + std::to_string(e);
      last.push_back(line);
    }
    EXPECT_FALSE(fs::exists(resident_path)) << "written under a temporary name until the model goes";
  }
  {
    Case c{"kimi_k3", 1, 0, LookaheadMode::Off, IoEngine::Pread, 1};
    EngineOptions o = engine_options(c);
    o.reader.direct = false;
    o.cache_gb = 3.0 * static_cast<double>(load_store_manifest(w.store(1)).expert_bytes) / 1e9 * 4;
    auto m = load_store(w.store(1), o);
    m->open_route_trace(streamed_path);
    logits_of(*m, w.ids, false);
    logits_of(*m, w.ids, true);
    EXPECT_GT(m->stream->counters().misses, 0u);
  }
  const RouteTrace t = read_route_trace(resident_path);
  EXPECT_EQ(t.layers, w.summary.layers);
  EXPECT_EQ(t.experts, w.summary.experts);
  EXPECT_EQ(t.top_k, w.summary.top_k);
  std::vector<int64_t> positions, streamed_positions;
  const std::vector<std::string> lines = route_lines(t, &positions);
  // One prefill pass of every token, then one pass per token.
  std::vector<int64_t> want(w.ids.size() + 1, 1);
  want[0] = static_cast<int64_t>(w.ids.size());
  EXPECT_EQ(positions, want);
  const size_t moe = w.summary.moe_layers.size();
  ASSERT_EQ(lines.size(), 2 * w.ids.size() * moe);
  EXPECT_EQ(std::vector<std::string>(lines.end() - static_cast<std::ptrdiff_t>(moe), lines.end()), last);
  // The prefill pass routed each position as its own decode pass did (a pass equals its parts).
  for (size_t l = 0; l < moe; ++l)
    for (size_t p = 0; p < w.ids.size(); ++p)
      EXPECT_EQ(lines[l * w.ids.size() + p], lines[w.ids.size() * moe + p * moe + l]) << "layer " << l << " position " << p;
  EXPECT_EQ(route_lines(read_route_trace(streamed_path), &streamed_positions), lines);
  EXPECT_EQ(streamed_positions, positions);
}

TEST(RouteTrace, BadFilesAreRefusedNamingTheLine) {
  test::TempDir d;
  auto refused = [&](const std::string& text) {
    const std::string p = d.path() + "/t.txt";
    std::ofstream(p) << text;
    try {
      read_route_trace(p);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string head = "deltafin-route-trace 1 layers=3 experts=4 top_k=2\n";
  EXPECT_EQ(refused(head + "P 1\nR 1 0 3\nR 2 1 2\n"), "accepted");
  EXPECT_NE(refused(head + "P 1\nR 1 0 4\n").find(":3: expert 4 is not one of 0 to 3"), std::string::npos);
  EXPECT_NE(refused(head + "P 1\nR 3 0 1\n").find(":3: layer must be 0 to 2"), std::string::npos);
  EXPECT_NE(refused(head + "P 1\nR 1 0\n").find(":3: a route of 1 experts; the trace's top_k is 2"), std::string::npos);
  EXPECT_NE(refused(head + "R 1 0 1\n").find(":2: a route before the first pass"), std::string::npos);
  EXPECT_NE(refused(head + "P 1\nR 1 0 x\n").find(":3: an expert id is not a whole number"), std::string::npos);
  EXPECT_NE(refused("deltafin-route-trace 2 layers=3 experts=4 top_k=2\n").find("version \"2\""), std::string::npos);
  EXPECT_NE(refused("deltafin-route-trace 1 layers=0 experts=4 top_k=2\n").find("layers must be a positive"),
            std::string::npos);
}
