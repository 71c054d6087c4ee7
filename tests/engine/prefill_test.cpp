// Expert-major prefill (engine/prefill.h): any chunk (slice) and group size
// gives the same final logits and the same session state, bit for bit, as
// decoding the prompt one token at a time; a prompt prefilled in one group
// from a cold cache reads every expert it needs exactly once (amplification
// 1.00), also in slices when the cache holds one layer's union; a cancel
// inside a group rolls the session back to the last whole group.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "engine/generate.h"
#include "engine/speculative_generate.h"
#include "model/kimi_k3/load/loaded_k3.h"
#include "model/loaders/family_loaders.h"
#include "engine/prefill.h"
#include "engine/stats_collector.h"
#include "model/kimi_k3/generator.h"
#include "store/setup.h"
#include "support/session_compare.h"
#include "support/test_support.h"

using namespace deltafin;
namespace fs = std::filesystem;
using test::expect_same_state;
using test::same_bits;

namespace {

struct Checkpoint {
  test::TempDir root;
  std::string dir;
  Checkpoint() {
    dir = root.path() + "/ckpt";
    GenerateOptions o;
    o.out_dir = dir;
    o.seed = 5;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
  }
  std::string store(int drives) {
    SetupOptions s;
    s.from = dir;
    s.store = root.path() + "/store" + std::to_string(drives);
    if (fs::exists(s.store)) return s.store;
    for (int d = 0; d < drives; ++d) {
      s.drives.push_back(root.path() + "/drive" + std::to_string(drives) + "_" + std::to_string(d));
      fs::create_directories(s.drives.back());
      s.drive_mbps.push_back(1000.0);
    }
    s.spine = "bf16";
    s.quiet = true;
    run_setup(s);
    return s.store;
  }
};

Checkpoint& checkpoint() {
  static Checkpoint c;
  return c;
}

// The checkpoint's store over `drives` drives, streamed with a cache of
// `cache_gb` (0 = the working set only: nothing survives from one layer's
// union to the next pass), heat not written back, reads in small chunks.
std::unique_ptr<LoadedK3> load_store(int drives, LookaheadMode lookahead, double cache_gb = 0) {
  EngineOptions o;
  o.cache_gb = cache_gb;
  o.lookahead = lookahead;
  o.save_heat = false;
  o.reader.chunk_bytes = 8192;
  return load_k3_store(checkpoint().store(drives), o);
}

}  // namespace

TEST(ExpertMajorPrefill, AnyChunkSizeEqualsTokenByTokenBitForBit) {
  auto m = load_k3_resident(checkpoint().dir, 2);
  // 100 positions: chunk 64 leaves a 36-position tail, chunk 3 a 1-position one.
  const std::vector<uint32_t> prompt = test::random_tokens(11, 100, static_cast<uint32_t>(m->config.vocab_size));

  K3Session reference(m->config);
  Rows ref_logits;
  for (uint32_t id : prompt) {
    const uint32_t one[1] = {id};
    ref_logits = m->model->forward(reference, one, false);
  }
  // Group 0 = by memory (the whole prompt here); 40 is not a multiple of 16
  // or 64 (a short last slice inside a group); 7 cuts the prompt in 15 groups.
  for (int64_t group : {0, 40, 7})
    for (int64_t chunk : {1, 3, 16, 64, 0}) {
      const std::string what = "chunk " + std::to_string(chunk) + ", group " + std::to_string(group);
      SCOPED_TRACE(what);
      K3Session s(m->config);
      Rows logits = prefill(*m->model, s, prompt, chunk, nullptr, {}, {}, group);
      ASSERT_EQ(logits.T, 1u);
      EXPECT_TRUE(same_bits(logits.v, ref_logits.v));
      expect_same_state(s, reference, m->config, what);
    }
}

TEST(ExpertMajorPrefill, StreamedPrefillEqualsResidentAndReadsEachExpertOnce) {
  auto resident = load_k3_resident(checkpoint().dir, 1);
  const std::vector<uint32_t> prompt = test::random_tokens(12, 40, static_cast<uint32_t>(resident->config.vocab_size));
  K3Session rs(resident->config);
  Rows want = prefill(*resident->model, rs, prompt, 0);

  auto m = load_store(2, LookaheadMode::Off);  // only demand reads: the count is exact by construction
  RunStatsCollector stats(*m);
  K3Session s(m->config);
  Rows got = prefill(*m->model, s, prompt, 0, &stats);
  EXPECT_TRUE(same_bits(got.v, want.v));
  expect_same_state(s, rs, m->config, "streamed");

  // Independent count: the distinct (layer, expert) pairs of the routes.
  std::set<std::pair<size_t, int64_t>> pairs;
  const auto& routes = m->model->last_routes();
  for (size_t l = 0; l < routes.size(); ++l)
    for (const Route& r : routes[l])
      for (int64_t e : r.experts) pairs.insert({l, e});
  const auto p = stats.prefill_totals();
  EXPECT_EQ(p.positions, prompt.size());
  EXPECT_EQ(p.passes, 1u);
  EXPECT_EQ(p.unique_pairs, pairs.size());
  EXPECT_EQ(p.bytes_read, pairs.size() * m->manifest->expert_bytes);
  EXPECT_DOUBLE_EQ(p.amplification(), 1.0);
}

// Distinct (layer, expert) pairs of the last pass's routes (the independent count).
static size_t unique_pairs(const K3Model& model) {
  std::set<std::pair<size_t, int64_t>> pairs;
  const auto& routes = model.last_routes();
  for (size_t l = 0; l < routes.size(); ++l)
    for (const Route& r : routes[l])
      for (int64_t e : r.experts) pairs.insert({l, e});
  return pairs.size();
}

TEST(ExpertMajorPrefill, SlicesOfOneGroupReadEachExpertOnceWhenTheCacheHoldsALayer) {
  // 48 positions route to all 16 experts of each of the tiny model's 9 MoE
  // layers (144 pairs). A cache of 24 slots holds one layer's union but not
  // the prompt's: sliced in 16-row chunks, layer-major order asks for a
  // layer's experts three times in a row and reads each once (the cache keeps
  // the current layer's experts while its slices last); the same slices taken
  // chunk by chunk through all layers (groups of 16) read them again.
  auto resident = load_k3_resident(checkpoint().dir, 1);
  const std::vector<uint32_t> prompt = test::random_tokens(13, 48, static_cast<uint32_t>(resident->config.vocab_size));
  K3Session rs(resident->config);
  Rows want = prefill(*resident->model, rs, prompt, 0);

  const double slot_gb = static_cast<double>(load_store(1, LookaheadMode::Off)->memory.slot_bytes) / 1e9;
  auto m = load_store(1, LookaheadMode::Off, 24.5 * slot_gb);
  ASSERT_EQ(m->memory.cache_slots, 24u);
  RunStatsCollector stats(*m);
  K3Session s(m->config);
  Rows got = prefill(*m->model, s, prompt, 16, &stats);
  EXPECT_TRUE(same_bits(got.v, want.v));
  expect_same_state(s, rs, m->config, "sliced");
  const size_t pairs = unique_pairs(*m->model);
  ASSERT_EQ(pairs, 144u);
  auto p = stats.prefill_totals();
  EXPECT_EQ(p.passes, 1u);
  EXPECT_EQ(p.unique_pairs, pairs);
  EXPECT_EQ(p.bytes_read, pairs * m->manifest->expert_bytes);
  EXPECT_DOUBLE_EQ(p.amplification(), 1.0);
  const StreamCounters c = m->stream->counters();
  EXPECT_EQ(c.misses, pairs);
  EXPECT_GT(c.demanded, pairs);  // later slices asked again and found them in RAM
  EXPECT_EQ(c.hits, c.demanded - pairs);

  // Chunk-major (one slice per group): the cache cannot keep a whole pass's
  // 144 experts, so every group reads most of its union again.
  auto cm = load_store(1, LookaheadMode::Off, 24.5 * slot_gb);
  RunStatsCollector cstats(*cm);
  K3Session cs(cm->config);
  Rows chunked = prefill(*cm->model, cs, prompt, 16, &cstats, {}, {}, 16);
  EXPECT_TRUE(same_bits(chunked.v, want.v));
  p = cstats.prefill_totals();
  EXPECT_EQ(p.passes, 3u);
  EXPECT_EQ(p.positions, 48u);
  EXPECT_GT(p.amplification(), 2.0);
  // Never more than one read per (pass, layer, expert) in use.
  uint64_t demanded = 0;
  for (const StepStats& st : cstats.steps()) demanded += st.demanded;
  EXPECT_LE(p.bytes_read, demanded * cm->manifest->expert_bytes);
}

TEST(ExpertMajorPrefill, ACancelInsideAGroupRollsBackToTheLastWholeGroup) {
  auto m = load_k3_resident(checkpoint().dir, 1);
  const std::vector<uint32_t> prompt = test::random_tokens(16, 30, static_cast<uint32_t>(m->config.vocab_size));
  K3Session reference(m->config);
  Rows ref_logits = prefill(*m->model, reference, std::span(prompt).first(10), 0);

  // The cancel comes on the third ask after group 1 is done: asked before
  // group 2, before its first layer, then before its second layer (or inside
  // the first one, if a poll came due there): inside group 2 either way.
  int groups_done = 0, asks_in_group_2 = 0;
  K3Session s(m->config);
  Rows none = prefill(*m->model, s, prompt, 5, nullptr, [&] { return groups_done == 1 && ++asks_in_group_2 >= 3; },
                      [&](size_t) { ++groups_done; }, 10);
  EXPECT_EQ(none.T, 0u);
  EXPECT_EQ(groups_done, 1);
  EXPECT_EQ(asks_in_group_2, 3);
  ASSERT_EQ(s.length(), 10);
  expect_same_state(s, reference, m->config, "after the cancel");

  // Prefill goes on from there as if never interrupted.
  K3Session full(m->config);
  Rows want = prefill(*m->model, full, prompt, 0);
  Rows rest = prefill(*m->model, s, std::span(prompt).subspan(10), 5, nullptr, {}, {}, 10);
  EXPECT_TRUE(same_bits(rest.v, want.v));
  expect_same_state(s, full, m->config, "resumed");
}

// A stop that comes while a layer runs is seen inside that layer (between
// its slices, experts and attention heads), not at the next layer: with
// polls due at every check, the cancel that turns true on the first poll
// after layer 3 began ends the pass before layer 4 starts. The session is
// then restored as prefill() does, and a later pass equals an uninterrupted one.
TEST(ExpertMajorPrefill, ACancelDuringALayerIsSeenInsideIt) {
  auto m = load_k3_resident(checkpoint().dir, 1);
  const std::vector<uint32_t> prompt = test::random_tokens(17, 40, static_cast<uint32_t>(m->config.vocab_size));
  for (const size_t slice : {size_t{0}, size_t{8}}) {
    SCOPED_TRACE("slice rows " + std::to_string(slice));
    K3Session s(m->config);
    const K3Session::Snapshot before = s.snapshot();
    int64_t last_layer = -1;
    int asks_in_layer_3 = 0;
    PassShape shape;
    shape.slice_rows = slice;
    shape.poll_interval = std::chrono::microseconds(0);
    shape.on_layer = [&](int64_t layer) { last_layer = layer; };
    // The first ask in layer 3 is prefill's own, before the layer; the second
    // can only come from inside it.
    shape.cancelled = [&] { return last_layer == 3 && ++asks_in_layer_3 >= 2; };
    Rows none = m->model->forward(s, prompt, false, shape);
    EXPECT_EQ(none.T, 0u);
    EXPECT_EQ(last_layer, 3) << "the cancel was not seen inside layer 3";
    EXPECT_EQ(asks_in_layer_3, 2);
    s.restore(before);
    EXPECT_EQ(s.length(), 0);
    K3Session fresh(m->config);
    Rows want = m->model->forward(fresh, prompt, false);
    Rows got = m->model->forward(s, prompt, false);
    EXPECT_TRUE(same_bits(got.v, want.v));
    expect_same_state(s, fresh, m->config, "after the cancelled pass");
  }
}

TEST(ExpertMajorPrefill, GenerateUsesTheChunkAndStopsBeforeThePrefill) {
  auto m = load_k3_resident(checkpoint().dir, 1);
  const std::vector<uint32_t> prompt = test::random_tokens(14, 30, static_cast<uint32_t>(m->config.vocab_size));
  std::vector<uint32_t> one_pass, chunked;
  GenerateParams p;
  p.max_new = 6;
  p.ignore_eos = true;
  p.prefill_chunk = 0;
  K3Session a(m->config), b(m->config);
  generate_speculative(*m->model, a, prompt, p, SpecParams{}, nullptr, [&](uint32_t id) { one_pass.push_back(id); });
  p.prefill_chunk = 7;
  generate_speculative(*m->model, b, prompt, p, SpecParams{}, nullptr, [&](uint32_t id) { chunked.push_back(id); });
  EXPECT_EQ(one_pass, chunked);
  ASSERT_EQ(one_pass.size(), 6u);

  // A stop request seen before the prefill ends generation before any token
  // and leaves the session as it was.
  std::atomic<bool> stop{true};
  p.stop = &stop;
  K3Session c(m->config);
  std::vector<uint32_t> none;
  GenerateStats st = generate_speculative(*m->model, c, prompt, p, SpecParams{}, nullptr, [&](uint32_t id) { none.push_back(id); });
  EXPECT_EQ(st.reason, StopReason::Interrupted);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(c.length(), 0);
}

TEST(ExpertMajorPrefill, PrefetchOnlyIntoSlotsTheCurrentLayerReleased) {
  // A 40-row pass of the tiny model needs about all 16 experts of a layer;
  // with a cache of the working set only there is no room for a prediction
  // for the next layer when it is made. It waits until the current layer has
  // claimed all its reads and releases slots, and is then read into them:
  // no prediction displaces a read of the current layer, and none that its
  // layer needs is evicted before the layer comes. Every byte read is used
  // except those of wrong predictions (predicted, not routed to). A one-row
  // pass with the whole model cached prefetches as before.
  const std::vector<uint32_t> prompt = test::random_tokens(15, 40, 700);
  auto m = load_store(1, LookaheadMode::On);
  K3Session s(m->config);
  prefill(*m->model, s, prompt, 0);
  StreamCounters c = m->stream->counters();
  EXPECT_GT(c.prefetch_deferred, 0u);
  EXPECT_EQ(c.prefetch_issued, c.prefetch_deferred);  // none fitted when predicted
  EXPECT_EQ(c.prefetch_lost, 0u);
  EXPECT_EQ(c.misses + c.hits + c.inflight, c.demanded);
  const uint64_t used = c.misses + c.prefetch_hits + c.inflight;
  const uint64_t wrong = c.prefetch_issued - c.prefetch_hits - c.inflight - c.prefetch_cancelled;
  EXPECT_LE(wrong, c.prefetch_issued / 4) << "issued " << c.prefetch_issued;  // lookahead recall on this model is ~0.6-0.9
  // (A wrong prediction may still be in flight when the pass ends.)
  EXPECT_GE(c.bytes_read, used * m->manifest->expert_bytes);
  EXPECT_LE(c.bytes_read, (used + wrong) * m->manifest->expert_bytes)
      << "misses " << c.misses << ", prefetch hits " << c.prefetch_hits << ", in flight " << c.inflight
      << ", issued " << c.prefetch_issued << ", cancelled " << c.prefetch_cancelled;

  auto big = load_store(1, LookaheadMode::On, 1.0);  // every expert fits
  K3Session s2(big->config);
  for (size_t i = 0; i < 8; ++i) {
    const uint32_t one[1] = {prompt[i]};
    big->model->forward(s2, one, false);
  }
  EXPECT_GT(big->stream->counters().prefetch_issued, 0u);
}
