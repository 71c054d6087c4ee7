// Streaming from a striped store (setup --layout striped): every expert is
// read as one stripe per drive into its place in the cache slot. Logits are
// bit-identical to the all-resident run for any cache size, drive count,
// bandwidth split, lookahead mode, I/O engine and thread count; a cold read
// moves each record's bytes exactly once; a damaged stripe stops the run
// naming the layer, expert, drive and stripe file; an unused striped prefetch
// is cancelled on every drive.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "model/kimi_k3/load/loaded_k3.h"
#include "load/family_loading.h"
#include "experts/streaming_source.h"
#include "model/kimi_k3/checkpoint.h"
#include "io/aligned_buffer.h"
#include "io/monitor.h"
#include "model/kimi_k3/generator.h"
#include "store/setup.h"
#include "store/store_manifest.h"
#include "support/reader_capability.h"
#include "support/store_damage.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
namespace fs = std::filesystem;

// A namespace of its own: the test binaries compile in unity batches
// (tests/CMakeLists.txt), where file-local names of two files would meet.
namespace striped_streaming_test {
namespace {

using Offsets = std::vector<uint64_t>;

std::vector<float> logits_of(K3Model& model, const std::vector<uint32_t>& ids, bool decode) {
  K3Session s(model.config());
  if (!decode) return model.forward(s, ids, true).v;
  std::vector<float> out;
  for (uint32_t id : ids) {
    const uint32_t one[1] = {id};
    Rows r = model.forward(s, one, true);
    out.insert(out.end(), r.v.begin(), r.v.end());
  }
  return out;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Passes every request to the resident source and notes which (layer, expert) were used.
class RecordingSource : public ExpertSource {
public:
  explicit RecordingSource(ExpertSource& inner) : inner_(inner) {}
  ExpertHandle get(int64_t layer, int64_t expert) override {
    {
      std::lock_guard<std::mutex> g(mu_);
      used_.insert({layer, expert});
    }
    return inner_.get(layer, expert);
  }
  std::set<std::pair<int64_t, int64_t>> used() const {
    std::lock_guard<std::mutex> g(mu_);
    return used_;
  }

private:
  ExpertSource& inner_;
  mutable std::mutex mu_;
  std::set<std::pair<int64_t, int64_t>> used_;
};

// The small preset cut to 6 layers: 19584-byte records (5 pages, the last
// partial), 5 MoE layers x 64 experts, 16 routed per token. Its resident logits, the experts
// a decode of the tokens uses, and stores of it.
struct World {
  test::TempDir root;
  std::string ckpt;
  std::vector<uint32_t> ids;
  std::vector<float> prefill, decode;
  std::set<std::pair<int64_t, int64_t>> decode_experts;  // distinct (layer, expert) a decode of ids uses
  std::map<std::string, std::string> stores;

  World() {
    ckpt = root.path() + "/ckpt";
    GenerateOptions o;
    o.out_dir = ckpt;
    o.seed = 21;
    o.dims = preset_dims("small");
    o.dims.layers = 6;  // 5 MoE layers: 320 records, so the four stores set up in seconds
    o.dims.full_attn_layers = default_full_attn_layers(6);
    o.progress = false;
    generate_k3_checkpoint(o);
    auto m = load_k3_resident(ckpt, 1);
    ids = test::random_tokens(4, 6, static_cast<uint32_t>(m->config.vocab_size));
    prefill = logits_of(*m->model, ids, false);
    decode = logits_of(*m->model, ids, true);
    RecordingSource rec(*m->experts);
    K3Model recorded(m->config, m->weights, rec, nullptr);
    if (!bit_identical(logits_of(recorded, ids, true), decode)) fail("the recording run differs from the resident one");
    decode_experts = rec.used();
  }

  // A store over one drive per entry of mbps (MB/s), in `layout`.
  std::string store(const std::string& name, const std::vector<double>& mbps, const std::string& layout) {
    auto it = stores.find(name);
    if (it != stores.end()) return it->second;
    SetupOptions s;
    s.from = ckpt;
    s.store = root.path() + "/store_" + name;
    for (size_t d = 0; d < mbps.size(); ++d) {
      s.drives.push_back(root.path() + "/drive_" + name + "_" + std::to_string(d));
      fs::create_directories(s.drives.back());
    }
    s.drive_mbps = mbps;
    s.spine = "bf16";
    s.layout = layout;
    s.quiet = true;
    const SetupReport r = run_setup(s);
    if (r.layout != layout) fail("store ", name, ": asked for ", layout, ", got ", r.layout);
    return stores[name] = s.store;
  }
  std::string striped2() { return store("s2", {1000, 1000}, "striped"); }
  std::string striped3() { return store("s3", {1000, 1000, 1000}, "striped"); }
  std::string striped3_unequal() { return store("s3u", {2000, 1000, 1000}, "striped"); }
  std::string whole1() { return store("w1", {1000}, "whole"); }
};

World& world() {
  static World w;
  return w;
}

constexpr uint64_t kRecord = 19584;

enum class Cache { None, Small, All };

struct Case {
  std::string store;  // s2, s3, s3u
  Cache cache;
  LookaheadMode lookahead;
  IoEngine io;
  int threads;
};

std::string case_name(const Case& c) {
  return c.store + "_cache" + (c.cache == Cache::None ? "none" : c.cache == Cache::Small ? "small" : "all") + "_" +
         lookahead_mode_name(c.lookahead) + "_" + io_engine_name(c.io) + "_t" + std::to_string(c.threads);
}

std::string store_of(const std::string& name) {
  World& w = world();
  if (name == "s2") return w.striped2();
  if (name == "s3") return w.striped3();
  if (name == "s3u") return w.striped3_unequal();
  if (name == "w1") return w.whole1();
  fail("no store ", name);
}

EngineOptions engine_options(Cache cache, LookaheadMode la, IoEngine io, int threads) {
  EngineOptions o;
  o.threads = threads;
  // None: the working set only; Small: about 48 slots (more than the working set,
  // far fewer than the 320 experts); All: every expert fits.
  o.cache_gb = cache == Cache::None ? 0.0 : cache == Cache::Small ? 48.0 * static_cast<double>(round_up_direct(kRecord)) / 1e9 : 1.0;
  o.lookahead = la;
  o.reader.io = io_engine_name(io);
  o.reader.queue_depth = 2;
  o.reader.chunk_bytes = 8192;  // stripes of 12288 bytes take two chunks
  o.save_heat = false;
  return o;
}

EngineOptions engine_options(const Case& c) { return engine_options(c.cache, c.lookahead, c.io, c.threads); }

// A streaming source's options with `cache_slots` slots, reading with `io`
// (one thread, no lookahead), for the tests that drive the source directly.
StreamOptions source_options(size_t cache_slots, IoEngine io) {
  StreamOptions so;
  so.cache_slots = cache_slots;
  so.reader = reader_options(engine_options(Cache::None, LookaheadMode::Off, io, 1).reader);
  return so;
}

std::vector<nlohmann::json> read_trace(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("t", "") == "read") out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

TEST(StripedStores, AreCutAsExpected) {
  // The stores the tests below stream from: 5 pages over 2 drives -> 3 + 2;
  // over 3 -> 2 + 2 + 1; over 2000/1000/1000 MB/s -> 2.5/1.25/1.25 -> 3 + 1 + 1.
  EXPECT_EQ(load_store_manifest(world().striped2()).stripe_offsets, (Offsets{0, 12288, 19584}));
  EXPECT_EQ(load_store_manifest(world().striped3()).stripe_offsets, (Offsets{0, 8192, 16384, 19584}));
  EXPECT_EQ(load_store_manifest(world().striped3_unequal()).stripe_offsets, (Offsets{0, 12288, 16384, 19584}));
  EXPECT_EQ(load_store_manifest(world().striped3()).expert_bytes, kRecord);
}

class StripedExactness : public ::testing::TestWithParam<Case> {};

TEST_P(StripedExactness, LogitsBitIdenticalToResident) {
  const Case& c = GetParam();
  std::string why;
  const std::string missing = test::missing_for_reader(c.io, &why);
  REQUIRE_CAPABILITY(missing, missing.empty(), why);
  World& w = world();
  auto m = load_k3_store(store_of(c.store), engine_options(c));
  ASSERT_TRUE(m->manifest->striped());
  test::expect_reader_as_asked(m->stream->reader(), c.io);
  EXPECT_TRUE(bit_identical(logits_of(*m->model, w.ids, true), w.decode)) << "decode";
  EXPECT_TRUE(bit_identical(logits_of(*m->model, w.ids, false), w.prefill)) << "prefill";
  const StreamCounters k = m->stream->counters();
  EXPECT_EQ(k.hits + k.misses + k.inflight, k.demanded);
  EXPECT_GT(k.demanded, 0u);
  EXPECT_GE(k.bytes_read, k.misses * kRecord);
  // With lookahead, bytes_read need not be a whole number of records: the
  // stripes of a cancelled prefetch that had already landed are counted
  // (a whole-file read cancelled midway counts nothing).
  if (c.lookahead == LookaheadMode::Off) {
    // No prefetch: every read is a demand read of a whole record (all its stripes).
    EXPECT_EQ(k.prefetch_issued, 0u);
    EXPECT_EQ(k.bytes_read, k.misses * kRecord);
  }
  if (c.cache == Cache::All) {
    EXPECT_GT(k.hits, 0u);  // the prefill reuses what the decode read
  }
}

// Each store, cache size, lookahead mode, engine and thread count appears,
// mixed with the others.
INSTANTIATE_TEST_SUITE_P(
    Knobs, StripedExactness,
    ::testing::Values(Case{"s2", Cache::None, LookaheadMode::Off, IoEngine::Pread, 1},
                      Case{"s2", Cache::Small, LookaheadMode::On, IoEngine::Uring, 2},
                      Case{"s2", Cache::All, LookaheadMode::On, IoEngine::Pread, 2},
                      Case{"s3", Cache::None, LookaheadMode::On, IoEngine::Uring, 1},
                      Case{"s3", Cache::Small, LookaheadMode::Off, IoEngine::Pread, 2},
                      Case{"s3", Cache::All, LookaheadMode::Off, IoEngine::Uring, 1},
                      Case{"s3", Cache::None, LookaheadMode::Off, IoEngine::Uring, 2},
                      Case{"s3u", Cache::Small, LookaheadMode::On, IoEngine::Pread, 1},
                      Case{"s3u", Cache::None, LookaheadMode::Auto, IoEngine::Uring, 2},
                      Case{"s3u", Cache::All, LookaheadMode::Off, IoEngine::Pread, 1}),
    [](const ::testing::TestParamInfo<Case>& i) { return case_name(i.param); });

TEST(StripedStreaming, ColdReadMovesEachRecordOnce) {
  World& w = world();
  ASSERT_GT(w.decode_experts.size(), 16u);
  for (const char* store : {"s2", "s3", "s3u", "w1"}) {
    for (IoEngine io : {IoEngine::Pread, IoEngine::Uring}) {
      if (!test::engine_here(io)) continue;
      SCOPED_TRACE(std::string(store) + " " + io_engine_name(io));
      auto m = load_k3_store(store_of(store), engine_options(Cache::All, LookaheadMode::Off, io, 1));
      EXPECT_EQ(m->stream->reader().engine(), io);
      EXPECT_TRUE(bit_identical(logits_of(*m->model, w.ids, true), w.decode));
      StreamCounters k = m->stream->counters();
      // Every distinct (layer, expert) the decode uses, read once, all of its bytes.
      EXPECT_EQ(k.misses, w.decode_experts.size());
      EXPECT_EQ(k.bytes_read, w.decode_experts.size() * kRecord);
      // What the drives served: the same bytes, spread over them by the stripe shares.
      uint64_t served = 0;
      const StoreManifest& man = *m->manifest;
      const auto status = m->stream->reader().drive_status();
      ASSERT_EQ(status.size(), man.drives.size());
      for (size_t d = 0; d < status.size(); ++d) {
        served += status[d].counters.bytes;
        if (man.striped()) {
          // Each read of a stripe covers its file (a partial last page read whole or not).
          EXPECT_GE(status[d].counters.bytes, w.decode_experts.size() * man.stripe_bytes(static_cast<int>(d))) << d;
          EXPECT_LE(status[d].counters.bytes,
                    w.decode_experts.size() * round_up_direct(man.stripe_bytes(static_cast<int>(d)))) << d;
        }
      }
      EXPECT_GE(served, w.decode_experts.size() * kRecord);
      EXPECT_LE(served, w.decode_experts.size() * round_up_direct(kRecord));
      // A prefill of the same tokens routes the same way: all hits, nothing read.
      EXPECT_TRUE(bit_identical(logits_of(*m->model, w.ids, false), w.prefill));
      const StreamCounters k2 = m->stream->counters();
      EXPECT_EQ(k2.bytes_read, k.bytes_read);
      EXPECT_EQ(k2.misses, k.misses);
      EXPECT_EQ(k2.hits - k.hits, k2.demanded - k.demanded);
    }
  }
}

// Faults ---------------------------------------------------------------------

namespace {

using test::StoreCopy;
using test::flip_byte;
using test::remove_file;
using test::truncate_file;

// Runs a decode; returns the error (expects one).
std::string failing_run(const std::string& store, IoEngine io) {
  std::string msg;
  try {
    auto m = load_k3_store(store, engine_options(Cache::None, LookaheadMode::Off, io, 1));
    EXPECT_EQ(m->stream->reader().engine(), io);
    logits_of(*m->model, world().ids, true);
    ADD_FAILURE() << "the run did not fail";
  } catch (const Error& e) {
    msg = e.what();
  }
  return msg;
}

// The message names "layer 1 expert N", drive d with its directory, and N's stripe file on d.
void expect_names_the_stripe(const std::string& msg, const StoreCopy& s, int d, const std::string& what) {
  std::smatch match;
  ASSERT_TRUE(std::regex_search(msg, match, std::regex("layer 1 expert ([0-9]+)"))) << msg;
  const int64_t e = std::stoll(match[1]);
  EXPECT_NE(msg.find(cat("drive ", d, " (", s.m.drives[static_cast<size_t>(d)].path, ")")), std::string::npos) << msg;
  EXPECT_NE(msg.find(s.m.stripe_path(d, 1, e)), std::string::npos) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
  for (int other = 0; other < static_cast<int>(s.m.drives.size()); ++other)
    if (other != d) {
      EXPECT_EQ(msg.find(s.m.stripe_path(other, 1, e)), std::string::npos) << "only the bad stripe: " << msg;
    }
}

}  // namespace

TEST(StripedFaults, MissingStripeStopsTheRunNamingIt) {
  for (IoEngine io : {IoEngine::Pread, IoEngine::Uring}) {
    if (!test::engine_here(io)) continue;
    SCOPED_TRACE(io_engine_name(io));
    StoreCopy s(world().striped3());
    s.damage_layer1_stripes(1, remove_file);
    expect_names_the_stripe(failing_run(s.store, io), s, 1, ".s1of3.bin");
  }
}

TEST(StripedFaults, TruncatedStripeStopsTheRunNamingIt) {
  for (IoEngine io : {IoEngine::Pread, IoEngine::Uring}) {
    if (!test::engine_here(io)) continue;
    SCOPED_TRACE(io_engine_name(io));
    StoreCopy s(world().striped3());
    s.damage_layer1_stripes(0, truncate_file);
    expect_names_the_stripe(failing_run(s.store, io), s, 0, ".s0of3.bin");
  }
}

TEST(StripedFaults, CorruptedStripeIsNeverUsed) {
  for (IoEngine io : {IoEngine::Pread, IoEngine::Uring}) {
    if (!test::engine_here(io)) continue;
    for (int d : {0, 2}) {
      SCOPED_TRACE(cat(io_engine_name(io), " drive ", d));
      StoreCopy s(world().striped3());
      s.damage_layer1_stripes(d, flip_byte);
      expect_names_the_stripe(failing_run(s.store, io), s, d, "CRC-32C mismatch");
    }
  }
}

TEST(StripedFaults, MissingDriveStopsNamingIt) {
  StoreCopy s(world().striped2());
  fs::remove_all(s.m.drives[1].path);
  const std::string msg = failing_run(s.store, IoEngine::Pread);
  EXPECT_NE(msg.find(s.m.drives[1].path), std::string::npos) << msg;
  EXPECT_NE(msg.find("drive 1"), std::string::npos) << msg;
}

TEST(StripedFaults, DamageToUnusedExpertsChangesNothing) {
  // Experts the decode never routes to may be damaged: the run is exact.
  World& w = world();
  StoreCopy s(w.striped3());
  int damaged = 0;
  for (int64_t l = 1; l < s.m.layers; ++l)
    for (int64_t e = 0; e < s.m.experts; ++e)
      if (!w.decode_experts.count({l, e})) {
        fs::remove(s.m.stripe_path(static_cast<int>((l + e) % 3), l, e));
        ++damaged;
      }
  ASSERT_GT(damaged, 0);
  auto m = load_k3_store(s.store, engine_options(Cache::None, LookaheadMode::Off, IoEngine::Pread, 1));
  EXPECT_TRUE(bit_identical(logits_of(*m->model, w.ids, true), w.decode));
}

// Cancellation ----------------------------------------------------------------

// A prefetch of a striped expert that the layer's real request does not use
// is cancelled, and on every drive: none of its stripes is read.
TEST(StripedPrefetch, UnusedPrefetchIsCancelledOnEveryDrive) {
  const K3Checkpoint ck = load_k3_checkpoint(world().ckpt);
  for (IoEngine io : {IoEngine::Pread, IoEngine::Uring}) {
    if (!test::engine_here(io)) continue;
    SCOPED_TRACE(io_engine_name(io));
    const StoreManifest man = load_store_manifest(world().striped3());
    // Prefetch room: 64 - 16 (one row's union) - 16 (demand reserve).
    StreamOptions so = source_options(64, io);
    test::TempDir tmp;
    Monitor monitor(3);
    monitor.open_trace(tmp.file("trace.jsonl"));
    auto owned = std::make_unique<StreamingExpertSource>(man, so, nullptr, &monitor, 16);
    StreamingExpertSource& src = *owned;
    EXPECT_EQ(src.reader().engine(), io);
    // Expert 0 of layer 1 in the cache, read through its three stripes.
    ExpertHandle h0 = src.get(1, 0);
    const std::vector<uint8_t> want0 = ck.read_expert_record(1, 0);
    EXPECT_EQ(std::memcmp(h0.data, want0.data(), kRecord), 0);
    StreamCounters k = src.counters();
    EXPECT_EQ(k.misses, 1u);
    EXPECT_EQ(k.bytes_read, kRecord);

    // With the reader paused, a prefetch of expert 5 is queued on all three drives.
    auto& reader = const_cast<ExpertReader&>(src.reader());
    reader.pause_dispatch(true);
    const int64_t five[1] = {5};
    src.prefetch(1, five);
    EXPECT_EQ(src.counters().prefetch_issued, 1u);
    auto status = reader.drive_status();
    ASSERT_EQ(status.size(), 3u);
    for (int d = 0; d < 3; ++d) EXPECT_EQ(status[d].queued_bytes, man.stripe_bytes(d)) << "drive " << d;

    // Layer 1 then asks for expert 0 only: the prefetch of 5 is dropped everywhere.
    const int64_t zero[1] = {0};
    int used = 0;
    src.for_each_ready(1, zero, [&](size_t, const uint8_t* p) {
      ++used;
      EXPECT_EQ(std::memcmp(p, want0.data(), kRecord), 0);
    });
    EXPECT_EQ(used, 1);
    k = src.counters();
    EXPECT_EQ(k.prefetch_cancelled, 1u);
    EXPECT_EQ(k.hits, 1u);
    status = reader.drive_status();
    for (int d = 0; d < 3; ++d) EXPECT_EQ(status[d].queued_bytes, 0u) << "drive " << d << " still holds a stripe";
    reader.pause_dispatch(false);

    // Expert 5 asked for later is a fresh demand read with the right bytes;
    // the cancelled prefetch read nothing.
    ExpertHandle h5 = src.get(1, 5);
    const std::vector<uint8_t> want5 = ck.read_expert_record(1, 5);
    EXPECT_EQ(std::memcmp(h5.data, want5.data(), kRecord), 0);
    k = src.counters();
    EXPECT_EQ(k.misses, 2u);
    EXPECT_EQ(k.bytes_read, 2 * kRecord);
    status = reader.drive_status();
    for (int d = 0; d < 3; ++d)
      EXPECT_LE(status[d].counters.bytes, 2 * round_up_direct(man.stripe_bytes(d))) << "drive " << d;

    // The trace: expert 5's three stripes, each cancelled as a prefetch and
    // then read whole on its own drive as a demand read. (Records are written
    // on the reader's threads, possibly after a read's waiter woke: the
    // source, and with it the reader, goes first.)
    owned.reset();
    monitor.close_trace();
    int cancelled = 0;
    uint64_t cancelled_bytes = 0;
    std::map<int, uint64_t> demand;
    for (const nlohmann::json& j : read_trace(tmp.file("trace.jsonl"))) {
      if (j["layer"] != 1 || j["expert"] != 5) continue;
      if (j["cancelled"].get<bool>()) {
        EXPECT_TRUE(j["prefetch"].get<bool>());
        ++cancelled;
        cancelled_bytes += j["bytes"].get<uint64_t>();
      } else {
        EXPECT_TRUE(j["ok"].get<bool>());
        EXPECT_FALSE(j["prefetch"].get<bool>());
        demand[j["drive"].get<int>()] += j["bytes"].get<uint64_t>();
      }
    }
    EXPECT_EQ(cancelled, 3);
    EXPECT_EQ(cancelled_bytes, kRecord);
    EXPECT_EQ(demand, (std::map<int, uint64_t>{{0, 8192}, {1, 8192}, {2, 3200}}));
  }
}

// A striped prefetch still loading when the layer asks for it is promoted:
// all of its stripes become demand reads, and its bytes are used.
TEST(StripedPrefetch, PrefetchDemandedWhileLoadingIsPromotedOnEveryDrive) {
  const K3Checkpoint ck = load_k3_checkpoint(world().ckpt);
  for (IoEngine io : {IoEngine::Pread, IoEngine::Uring}) {
    if (!test::engine_here(io)) continue;
    SCOPED_TRACE(io_engine_name(io));
    const StoreManifest man = load_store_manifest(world().striped3_unequal());  // stripes 12288, 4096, 3200
    StreamOptions so = source_options(64, io);
    test::TempDir tmp;
    Monitor monitor(3);
    monitor.open_trace(tmp.file("trace.jsonl"));
    auto owned = std::make_unique<StreamingExpertSource>(man, so, nullptr, &monitor, 16);
    StreamingExpertSource& src = *owned;
    EXPECT_EQ(src.reader().engine(), io);
    src.get(3, 0);  // expert 0 in the cache
    auto& reader = const_cast<ExpertReader&>(src.reader());
    reader.pause_dispatch(true);
    const int64_t nine[1] = {9};
    src.prefetch(3, nine);
    // Layer 3 wants 0 (a hit, used first) and 9 (loading: promoted when
    // taken, before any use). Using 0 lets the reader go on.
    const int64_t both[2] = {0, 9};
    std::map<size_t, std::vector<uint8_t>> got;
    src.for_each_ready(3, both, [&](size_t i, const uint8_t* p) {
      got[i].assign(p, p + kRecord);
      reader.pause_dispatch(false);
    });
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0], ck.read_expert_record(3, 0));
    EXPECT_EQ(got[1], ck.read_expert_record(3, 9));
    const StreamCounters k = src.counters();
    EXPECT_EQ(k.inflight, 1u);
    EXPECT_EQ(k.prefetch_cancelled, 0u);
    EXPECT_EQ(k.bytes_read, 2 * kRecord);
    owned.reset();  // every record written
    monitor.close_trace();
    std::map<int, uint64_t> promoted;
    for (const nlohmann::json& j : read_trace(tmp.file("trace.jsonl"))) {
      if (j["layer"] != 3 || j["expert"] != 9) continue;
      EXPECT_TRUE(j["ok"].get<bool>());
      EXPECT_TRUE(j["prefetch"].get<bool>());
      EXPECT_TRUE(j["promoted"].get<bool>()) << j.dump();
      promoted[j["drive"].get<int>()] += j["bytes"].get<uint64_t>();
    }
    EXPECT_EQ(promoted, (std::map<int, uint64_t>{{0, 12288}, {1, 4096}, {2, 3200}}));
  }
}

// Stripes still queued when the source goes away are dropped cleanly.
TEST(StripedPrefetch, SourceDestroyedWithStripesQueued) {
  const StoreManifest man = load_store_manifest(world().striped3());
  StreamOptions so = source_options(64, IoEngine::Uring);
  for (int round = 0; round < 3; ++round) {
    StreamingExpertSource src(man, so, nullptr, nullptr, 16);
    const_cast<ExpertReader&>(src.reader()).pause_dispatch(true);
    const int64_t some[4] = {1, 2, 3, 4};
    src.prefetch(2, some);
    EXPECT_EQ(src.counters().prefetch_issued, 4u);
  }
}

// A prefetch the layer does use is kept and served from the cache.
TEST(StripedPrefetch, UsedPrefetchIsAHit) {
  const K3Checkpoint ck = load_k3_checkpoint(world().ckpt);
  const StoreManifest man = load_store_manifest(world().striped2());
  StreamOptions so = source_options(64, IoEngine::Pread);
  StreamingExpertSource src(man, so, nullptr, nullptr, 16);
  const int64_t seven[1] = {7};
  src.prefetch(2, seven);
  std::vector<uint8_t> got;
  src.for_each_ready(2, seven, [&](size_t, const uint8_t* p) { got.assign(p, p + kRecord); });
  EXPECT_EQ(got, ck.read_expert_record(2, 7));
  const StreamCounters k = src.counters();
  EXPECT_EQ(k.prefetch_issued, 1u);
  EXPECT_EQ(k.prefetch_cancelled, 0u);
  EXPECT_EQ(k.misses, 0u);
  EXPECT_EQ(k.hits + k.inflight, 1u);
  EXPECT_EQ(k.bytes_read, kRecord);
}

// A request hands over what is ready together: the hits in one group first,
// then the misses, every read that has landed by the time one is waited for
// in the same group; each expert once, with its own bytes.
TEST(StreamingGroups, HitsComeAsOneGroupAndLandedReadsTogether) {
  const K3Checkpoint ck = load_k3_checkpoint(world().ckpt);
  const StoreManifest man = load_store_manifest(world().striped2());
  StreamOptions so = source_options(64, IoEngine::Pread);
  StreamingExpertSource src(man, so, nullptr, nullptr, 16);
  for (int64_t e : {0, 1, 2}) src.get(2, e);  // in the cache
  auto& reader = const_cast<ExpertReader&>(src.reader());
  reader.pause_dispatch(true);
  const int64_t want[5] = {0, 5, 1, 6, 2};  // 5 and 6 are misses
  std::vector<std::set<size_t>> groups;
  std::map<size_t, int> handed;
  bool landed = false;
  src.for_each_ready_group(2, want, [&](std::span<const ReadyExpert> group) {
    groups.emplace_back();
    for (const ReadyExpert& r : group) {
      groups.back().insert(r.index);
      ++handed[r.index];
      EXPECT_EQ(std::memcmp(r.record, ck.read_expert_record(2, want[r.index]).data(), kRecord), 0) << r.index;
    }
    if (groups.size() > 1) return;
    // While the hits are computed, both misses land (the wait ends after 60 s
    // at most, so a failure cannot hang).
    reader.pause_dispatch(false);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (src.cache().ready_count() < 5 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    landed = src.cache().ready_count() == 5;
  });
  EXPECT_TRUE(landed);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::set<size_t>{0, 2, 4}));
  EXPECT_EQ(groups[1], (std::set<size_t>{1, 3}));
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(handed[i], 1) << i;
  const StreamCounters k = src.counters();
  EXPECT_EQ(k.hits, 3u);
  EXPECT_EQ(k.misses, 3u + 2u);  // the three get() calls, then 5 and 6
}

// A demand that finds every cache slot held by reads it did not start waits
// for one of them to land, then reads its expert into the freed slot. The
// demand reserve (experts_per_token) normally keeps slots claimable; a source
// with none lets prefetches in flight hold them all, the state this wait is
// for. The wait is counted: exactly one (a loop that spun instead of waiting
// would count many), and only after it is seen do the prefetches go on.
TEST(StreamingGroups, ADemandWaitsWhileEverySlotIsHeldByReadsInFlight) {
  const K3Checkpoint ck = load_k3_checkpoint(world().ckpt);
  const StoreManifest man = load_store_manifest(world().striped2());
  StreamOptions so = source_options(4, IoEngine::Pread);
  StreamingExpertSource src(man, so, nullptr, nullptr, /*experts_per_token=*/0);
  auto& reader = const_cast<ExpertReader&>(src.reader());
  reader.pause_dispatch(true);
  const int64_t next_layer[4] = {10, 11, 12, 13};
  src.prefetch(3, next_layer);
  ASSERT_EQ(src.counters().prefetch_issued, 4u);  // every slot loading, nothing can land
  bool seen_waiting = false;
  std::atomic<bool> returned{false};
  std::thread release([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (src.slot_waits() == 0 && !returned && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    seen_waiting = src.slot_waits() > 0;
    reader.pause_dispatch(false);
  });
  const int64_t want[1] = {7};
  int used = 0;
  try {
    src.for_each_ready(2, want, [&](size_t, const uint8_t* p) {
      ++used;
      EXPECT_EQ(std::memcmp(p, ck.read_expert_record(2, 7).data(), kRecord), 0);
    });
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  returned = true;
  release.join();
  EXPECT_TRUE(seen_waiting) << "the demand never waited for a slot";
  EXPECT_EQ(used, 1);
  EXPECT_EQ(src.slot_waits(), 1u);
  const StreamCounters k = src.counters();
  EXPECT_EQ(k.slot_waits, 1u);
  EXPECT_EQ(k.misses, 1u);
  EXPECT_EQ(k.hits, 0u);
  EXPECT_EQ(src.cache().evictions(), 1u);  // a landed prefetch made room
}
}  // namespace striped_streaming_test
