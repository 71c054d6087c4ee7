// The expert cache's slot state machine and eviction policy, with hand-built
// scenarios whose right answer follows from the stated rules.
#include "experts/expert_cache.h"

#include <gtest/gtest.h>

#include <thread>

namespace deltafin {
namespace {

using Outcome = ExpertCache::Outcome;
using State = ExpertCache::State;

CacheOptions opts(size_t slots, size_t pinned = 0, size_t reserve = 0) {
  CacheOptions o;
  o.record_bytes = 5000;  // not a 4 KiB multiple: slots round up
  o.slots = slots;
  o.pinned_slots = pinned;
  o.prefetch_reserve = reserve;
  o.experts_per_layer = 10;
  return o;
}

// Loads `key` as a demand read and releases it: it is then cached and evictable.
int load(ExpertCache& c, int64_t key) {
  ExpertCache::Claim cl = c.acquire(key, true);
  EXPECT_EQ(cl.outcome, Outcome::Claimed) << key;
  c.finish_load(cl.slot, true, "");
  c.release(cl.slot);
  return cl.slot;
}

TEST(ExpertCache, ClaimLoadHitRelease) {
  ExpertCache c(opts(2));
  ExpertCache::Claim a = c.acquire(11, true);
  ASSERT_EQ(a.outcome, Outcome::Claimed);
  EXPECT_EQ(c.state(a.slot), State::Loading);
  // A second demand while loading shares the slot.
  ExpertCache::Claim again = c.acquire(11, true);
  EXPECT_EQ(again.outcome, Outcome::Loading);
  EXPECT_EQ(again.slot, a.slot);
  c.finish_load(a.slot, true, "");
  EXPECT_EQ(c.state(a.slot), State::Ready);
  c.release(a.slot);
  c.release(a.slot);
  ExpertCache::Claim hit = c.acquire(11, true);
  EXPECT_EQ(hit.outcome, Outcome::Ready);
  EXPECT_EQ(hit.slot, a.slot);
  EXPECT_EQ(c.key(hit.slot), 11);
  c.release(hit.slot);
  EXPECT_THROW(c.release(hit.slot), std::exception);  // no reference left
}

TEST(ExpertCache, BuffersAreAlignedAndReusedWithoutAllocation) {
  ExpertCache c(opts(2));
  const int s0 = load(c, 1);
  uint8_t* before = c.data(s0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(before) % 4096, 0u);
  load(c, 2);
  const int s3 = load(c, 3);  // evicts key 1 (least recently used) and reuses its buffer
  EXPECT_EQ(s3, s0);
  EXPECT_EQ(c.data(s3), before);
  EXPECT_EQ(c.evictions(), 1u);
}

TEST(ExpertCache, EvictsLeastRecentlyUsed) {
  ExpertCache c(opts(3));
  load(c, 1);
  load(c, 2);
  load(c, 3);
  // Touch 1: now 2 is the oldest.
  ExpertCache::Claim t = c.acquire(1, true);
  ASSERT_EQ(t.outcome, Outcome::Ready);
  c.release(t.slot);
  load(c, 4);
  EXPECT_EQ(c.acquire(2, false).outcome, Outcome::Claimed);  // 2 was gone
  EXPECT_EQ(c.acquire(1, false).outcome, Outcome::Ready);
  EXPECT_EQ(c.acquire(4, false).outcome, Outcome::Ready);
}

TEST(ExpertCache, HeatKeepsAHotExpertOverARecentColdOne) {
  HeatHistogram heat(2, 10);
  heat.add(0, 1, 100.0);  // key 1 (layer 0, expert 1) is very hot; keys 2, 3 never used before
  CacheOptions o = opts(2);
  o.heat = &heat;
  ExpertCache c(o);
  load(c, 1);  // p = (100 + 1) / (100 + 10)
  load(c, 2);  // p = 1 / 110
  load(c, 3);  // must evict 2 (lower p) although 1 is older
  EXPECT_EQ(c.acquire(1, false).outcome, Outcome::Ready);
  EXPECT_EQ(c.acquire(3, false).outcome, Outcome::Ready);
  // Without heat the same sequence evicts 1.
  ExpertCache plain(opts(2));
  load(plain, 1);
  load(plain, 2);
  load(plain, 3);
  EXPECT_EQ(plain.acquire(2, false).outcome, Outcome::Ready);
}

// Four MoE layers 1..4 visited in order; 10 experts each (key = 10 * layer + e).
TEST(ExpertCache, KeepsTheExpertsOfTheLayersComingNext) {
  CacheOptions o = opts(3);
  o.first_layer = 1;
  o.layer_cycle = 4;
  ExpertCache c(o);
  c.set_current_layer(1);
  load(c, 21);  // layer 2: next up (d = 0)
  load(c, 31);  // layer 3: d = 1
  load(c, 11);  // layer 1, just used: next needed a whole pass later (d = 3)
  load(c, 12);  // evicts 11 although 21 is the least recently used (LRU would drop 21)
  EXPECT_EQ(c.acquire(11, false).outcome, Outcome::Claimed);
  EXPECT_EQ(c.acquire(21, false).outcome, Outcome::Ready);
  EXPECT_EQ(c.acquire(31, false).outcome, Outcome::Ready);
  // Moving on to layer 3: layer 2's experts are now the furthest away (d = 3).
  ExpertCache c2(o);
  c2.set_current_layer(3);
  load(c2, 21);
  load(c2, 41);
  load(c2, 11);
  load(c2, 32);  // evicts 21 (d = 3) before 41 (d = 0) and 11 (d = 1)
  EXPECT_EQ(c2.acquire(21, false).outcome, Outcome::Claimed);
  EXPECT_EQ(c2.acquire(41, false).outcome, Outcome::Ready);
}

// A layer-major prefill asks for layer 1 again (its next slice) before layer
// 2: layer 1's experts are then needed first (d = 0) and the others one
// further than usual, so the same loads as above evict layer 3's instead.
TEST(ExpertCache, KeepsTheCurrentLayerWhileItsSlicesLast) {
  CacheOptions o = opts(3);
  o.first_layer = 1;
  o.layer_cycle = 4;
  ExpertCache c(o);
  c.set_current_layer(1, true);
  load(c, 21);  // layer 2: d = 1
  load(c, 31);  // layer 3: d = 2
  load(c, 11);  // layer 1: its next slice comes first (d = 0)
  load(c, 12);  // evicts 31
  EXPECT_FALSE(c.contains(31));
  EXPECT_TRUE(c.contains(11));
  EXPECT_TRUE(c.contains(21));
  // At the last slice the usual cycle is back: layer 1 is furthest away.
  c.set_current_layer(1, false);
  load(c, 13);  // evicts 11 or 12 (d = 3), not 21 (d = 0)
  EXPECT_TRUE(c.contains(21));
  EXPECT_EQ(c.contains(11) + c.contains(12), 1);
}

TEST(ExpertCache, ReferencedAndLoadingSlotsAreNeverEvicted) {
  ExpertCache c(opts(2));
  ExpertCache::Claim a = c.acquire(1, true);  // loading, referenced
  ExpertCache::Claim b = c.acquire(2, true);
  ASSERT_EQ(b.outcome, Outcome::Claimed);
  c.finish_load(b.slot, true, "");            // ready but still referenced
  ExpertCache::Claim full = c.acquire(3, true);
  EXPECT_EQ(full.outcome, Outcome::Full);
  // A release from another thread wakes a waiter blocked on the Full claim.
  std::thread t([&] { c.release(b.slot); });
  c.wait_change(full.version);
  t.join();
  EXPECT_EQ(c.acquire(3, true).outcome, Outcome::Claimed);
  c.finish_load(a.slot, true, "");
}

TEST(ExpertCache, PrefetchLeavesTheDemandReserve) {
  ExpertCache c(opts(3, 0, 2));
  EXPECT_EQ(c.acquire(1, false).outcome, Outcome::Claimed);  // 3 claimable -> 2 left
  EXPECT_EQ(c.acquire(2, false).outcome, Outcome::Full);     // would leave 1 < reserve 2
  EXPECT_EQ(c.acquire(2, true).outcome, Outcome::Claimed);   // demand may
  EXPECT_EQ(c.acquire(3, true).outcome, Outcome::Claimed);
}

TEST(ExpertCache, FailedLoadKeepsTheErrorForTheWaiterThenFrees) {
  ExpertCache c(opts(2));
  ExpertCache::Claim a = c.acquire(5, true);
  c.finish_load(a.slot, false, "layer 0 expert 5: bad bytes");
  EXPECT_EQ(c.state(a.slot), State::Failed);
  EXPECT_EQ(c.error(a.slot), "layer 0 expert 5: bad bytes");
  c.release(a.slot);
  EXPECT_EQ(c.state(a.slot), State::Empty);
  // A failed prefetch nobody waits for frees its slot at once.
  ExpertCache::Claim p = c.acquire(6, false);
  c.finish_load(p.slot, false, "x");
  EXPECT_EQ(c.state(p.slot), State::Empty);
  EXPECT_EQ(c.acquire(6, true).outcome, Outcome::Claimed);  // retried as a fresh read
}

TEST(ExpertCache, PinnedSlotsSurviveAnyPressure) {
  ExpertCache c(opts(1, 1));
  ExpertCache::Claim p = c.acquire_pinned(9);
  ASSERT_EQ(p.outcome, Outcome::Claimed);
  c.finish_load(p.slot, true, "");
  for (int64_t k = 20; k < 30; ++k) load(c, k);
  ExpertCache::Claim hit = c.acquire(9, true);
  EXPECT_EQ(hit.outcome, Outcome::Ready);
  EXPECT_EQ(hit.slot, p.slot);
  c.release(hit.slot);
  EXPECT_EQ(c.acquire_pinned(10).outcome, Outcome::Full);  // the pinned tier is full
}

TEST(ExpertCache, ListsLoadingPrefetchesButNotPinnedOrDemanded) {
  ExpertCache c(opts(4, 1));
  ExpertCache::Claim p1 = c.acquire(1, false);
  c.set_ticket(p1.slot, 101);
  ExpertCache::Claim d = c.acquire(2, true);
  c.set_ticket(d.slot, 102);
  ExpertCache::Claim pin = c.acquire_pinned(3);
  c.set_ticket(pin.slot, 103);
  auto list = c.loading_prefetches();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].first, 1);
  EXPECT_EQ(list[0].second, 101u);
  // Once demanded, a prefetch is no longer stale-cancellable.
  ExpertCache::Claim dem = c.acquire(1, true);
  EXPECT_EQ(dem.outcome, Outcome::Loading);
  EXPECT_EQ(dem.ticket, 101u);
  EXPECT_TRUE(dem.prefetched);
  EXPECT_TRUE(c.loading_prefetches().empty());
}

// An aborted prefetch is forgotten at once: the key can be claimed and read
// afresh while the cancelled read is still landing in the old slot.
TEST(ExpertCache, ForgottenLoadFreesTheKeyAndThenTheSlot) {
  ExpertCache c(opts(3));
  ExpertCache::Claim p = c.acquire(7, false);
  ASSERT_EQ(p.outcome, Outcome::Claimed);
  c.forget(7);
  ExpertCache::Claim again = c.acquire(7, true);
  EXPECT_EQ(again.outcome, Outcome::Claimed);
  EXPECT_NE(again.slot, p.slot);
  EXPECT_EQ(c.state(p.slot), State::Loading);  // the cancelled read still owns its buffer
  c.finish_load(p.slot, false, "");
  EXPECT_EQ(c.state(p.slot), State::Empty);
  EXPECT_EQ(c.key(again.slot), 7);
  c.finish_load(again.slot, true, "");
  c.release(again.slot);
}

TEST(ExpertCache, WaitAnyReturnsTheSlotThatLanded) {
  ExpertCache c(opts(3));
  ExpertCache::Claim a = c.acquire(1, true), b = c.acquire(2, true);
  std::thread t([&] { c.finish_load(b.slot, true, ""); });
  const int slots[2] = {a.slot, b.slot};
  EXPECT_EQ(c.wait_any(slots), 1u);
  t.join();
  c.finish_load(a.slot, true, "");
  EXPECT_EQ(c.wait_any(slots), 0u);
}

}  // namespace
}  // namespace deltafin
