#include "experts/cache_sim.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <span>
#include <thread>

#include "util/error.h"

namespace deltafin {

CacheReplay make_replay(const std::vector<RouteTrace>& traces, const std::vector<std::string>& names) {
  if (traces.empty()) fail("cache-sim: no route trace");
  CacheReplay r;
  r.layers = traces[0].layers, r.experts = traces[0].experts, r.top_k = traces[0].top_k;
  std::vector<char> routed(static_cast<size_t>(r.layers), 0);
  std::vector<int64_t> seen(static_cast<size_t>(r.experts), -1);  // expert -> the step that has it
  for (size_t t = 0; t < traces.size(); ++t) {
    const RouteTrace& tr = traces[t];
    const std::string& name = t < names.size() ? names[t] : std::string("trace");
    if (tr.layers != r.layers || tr.experts != r.experts || tr.top_k != r.top_k)
      fail(name, ": layers=", tr.layers, " experts=", tr.experts, " top_k=", tr.top_k, ", but ",
           names.empty() ? std::string("the first trace") : names[0], " has layers=", r.layers,
           " experts=", r.experts, " top_k=", r.top_k, " (traces of one model only)");
    for (const RouteTrace::Pass& p : tr.passes) {
      CacheReplay::Pass pass{p.positions, r.steps.size(), 0};
      // A step's experts are kept sorted, as the routed-experts block asks for them.
      auto close_step = [&] {
        if (pass.count == 0) return;
        std::sort(r.demands.begin() + static_cast<std::ptrdiff_t>(r.steps.back().first), r.demands.end());
      };
      for (size_t i = 0; i < p.layer.size(); ++i) {
        const int64_t layer = p.layer[i];
        routed[static_cast<size_t>(layer)] = 1;
        if (i == 0 || p.layer[i - 1] != layer) {
          close_step();
          r.steps.push_back({layer, r.demands.size(), 0});
          ++pass.count;
        }
        CacheReplay::Step& s = r.steps.back();
        const int64_t step = static_cast<int64_t>(r.steps.size() - 1);
        for (int64_t k = 0; k < tr.top_k; ++k) {
          const int64_t e = p.experts[i * static_cast<size_t>(tr.top_k) + static_cast<size_t>(k)];
          if (seen[static_cast<size_t>(e)] == step) continue;  // another row's already
          seen[static_cast<size_t>(e)] = step;
          r.demands.push_back(e);
          ++s.count;
        }
      }
      close_step();
      r.passes.push_back(pass);
    }
  }
  for (int64_t l = 0; l < r.layers; ++l)
    if (routed[static_cast<size_t>(l)]) r.moe_layers.push_back(l);
  return r;
}

HeatHistogram learn_heat(const CacheReplay& r) {
  HeatHistogram h(r.layers, r.experts);
  ReuseTracker reuse(r.layers);  // as the streaming source feeds it
  for (const CacheReplay::Pass& p : r.passes) {
    if (!r.decode(p)) reuse.break_chain();
    for (size_t s = p.first; s < p.first + p.count; ++s) {
      const CacheReplay::Step& st = r.steps[s];
      for (size_t i = st.first; i < st.first + st.count; ++i) h.add(st.layer, r.demands[i]);
      if (r.decode(p)) reuse.decoded(st.layer, std::span(r.demands).subspan(st.first, st.count), h);
    }
    h.decay(std::pow(kHeatDecayPerPosition, static_cast<double>(p.positions)));
  }
  return h;
}

RouteTraceSummary summarize(const CacheReplay& r) {
  RouteTraceSummary t;
  t.moe_layers = static_cast<int64_t>(r.moe_layers.size());
  t.experts = r.experts;
  t.top_k = r.top_k;
  const size_t E = static_cast<size_t>(r.experts);
  std::vector<std::vector<uint64_t>> counts(static_cast<size_t>(r.layers));
  std::vector<double> reused(static_cast<size_t>(r.layers), 0), pairs(static_cast<size_t>(r.layers), 0);
  // The previous token's experts per layer, as a step index (-1: none, or a prefill in between).
  std::vector<int64_t> previous(static_cast<size_t>(r.layers), -1);
  std::vector<int64_t> mark(static_cast<size_t>(r.layers) * E, -1);  // (layer, expert) -> step that used it
  for (const CacheReplay::Pass& p : r.passes) {
    if (!r.decode(p)) {
      ++t.prefill_passes;
      t.prefill_positions += p.positions;
      std::fill(previous.begin(), previous.end(), -1);
      continue;
    }
    ++t.decode_tokens;
    for (size_t s = p.first; s < p.first + p.count; ++s) {
      const CacheReplay::Step& st = r.steps[s];
      const size_t l = static_cast<size_t>(st.layer);
      if (counts[l].empty()) counts[l].assign(E, 0);
      size_t both = 0;
      for (size_t i = st.first; i < st.first + st.count; ++i) {
        const size_t e = static_cast<size_t>(r.demands[i]);
        ++counts[l][e];
        if (previous[l] >= 0 && mark[l * E + e] == previous[l]) ++both;
        mark[l * E + e] = static_cast<int64_t>(s);
      }
      if (previous[l] >= 0) reused[l] += static_cast<double>(both) / static_cast<double>(st.count), ++pairs[l];
      previous[l] = static_cast<int64_t>(s);
    }
  }
  for (int64_t layer : r.moe_layers) {
    const size_t l = static_cast<size_t>(layer);
    RouteTraceSummary::Layer out;
    out.layer = layer;
    if (!counts[l].empty()) {
      std::vector<uint64_t> c = counts[l];
      std::sort(c.begin(), c.end(), std::greater<>());
      uint64_t total = 0;
      for (uint64_t v : c) total += v;
      for (int q = 0; q < 4; ++q) {
        uint64_t sum = 0;
        size_t n = 0;
        const double share = kCoverageShares[q] * static_cast<double>(total);
        while (n < c.size() && static_cast<double>(sum) < share) sum += c[n++];
        out.coverage[q] = static_cast<double>(n) / static_cast<double>(E);
      }
    }
    if (pairs[l] > 0) out.reuse = reused[l] / pairs[l];
    t.layers.push_back(out);
  }
  return t;
}

size_t pinned_slots_of(size_t slots, double pinned_fraction) {
  return static_cast<size_t>(std::llround(pinned_fraction * static_cast<double>(slots)));
}

void check_cache_size(const CacheReplay& r, size_t slots, double pinned_fraction, const std::string& what) {
  const size_t k = static_cast<size_t>(r.top_k);
  if (slots < k)
    fail(what, ": ", slots, " slots cannot hold one layer's ", k,
         " experts, which are all in RAM at once while it is computed: give at least ", k);
  const size_t pinned = pinned_slots_of(slots, pinned_fraction);
  if (slots - pinned < k)
    fail(what, ": ", pinned, " of its ", slots, " slots pinned (--pinned-fraction ", pinned_fraction, ") leave ",
         slots - pinned, ", fewer than one layer's ", k, " experts");
}

namespace {

// One layer's request, as StreamingExpertSource::for_each_ready_group makes
// it with no prefetch and reads that land at once: experts in a slot first,
// then the misses, in ascending order within each; every one is held until
// the layer is done. When more are missed than slots can be claimed, the
// rest wait: the hits are released first, then the claimed misses, and the
// rest is claimed as slots come free, as the engine's loop does. Returns the hits.
uint64_t demand_layer(ExpertCache& cache, int64_t layer, int64_t experts, std::span<const int64_t> needed) {
  std::vector<int64_t> order, missed;
  for (int64_t e : needed) (cache.contains(layer * experts + e) ? order : missed).push_back(e);
  order.insert(order.end(), missed.begin(), missed.end());
  uint64_t hits = 0;
  std::vector<int> held, claimed;
  std::vector<int64_t> deferred;
  auto take = [&](int64_t e) {
    const ExpertCache::Claim c = cache.acquire(layer * experts + e, true);
    switch (c.outcome) {
      case ExpertCache::Outcome::Ready:
        ++hits;
        held.push_back(c.slot);
        return true;
      case ExpertCache::Outcome::Claimed:
        cache.finish_load(c.slot, true, "");
        claimed.push_back(c.slot);
        return true;
      case ExpertCache::Outcome::Loading:  // only a prefetch leaves a read in flight
        fail("cache-sim: layer ", layer, " expert ", e, " found loading with nothing read ahead");
      case ExpertCache::Outcome::Full:
        return false;
    }
    return false;
  };
  auto release = [&](std::vector<int>& slots) {
    for (int s : slots) cache.release(s);
    slots.clear();
  };
  for (int64_t e : order)
    if (!take(e)) deferred.push_back(e);
  size_t next = 0;
  for (;;) {
    release(held);
    while (next < deferred.size() && take(deferred[next])) ++next;
    release(held);
    if (claimed.empty()) {
      if (next == deferred.size()) break;
      fail("cache-sim: layer ", layer, ": no slot comes free for its experts");
    }
    release(claimed);
  }
  return hits;
}

void count(CacheSimRow& row, bool decode, size_t demanded, uint64_t hits) {
  (decode ? row.demanded : row.prefill_demanded) += demanded;
  (decode ? row.hits : row.prefill_hits) += hits;
}

}  // namespace

void require_decode(const CacheReplay& r, const std::string& what) {
  for (const CacheReplay::Pass& p : r.passes)
    if (r.decode(p)) return;
  fail(what, ": no decode passes (passes of one position): cache-sim measures decoding (trace a run with --max-new)");
}

PolicyReplay::PolicyReplay(const CacheReplay& r, CachePolicyKind kind, size_t slots, size_t pinned,
                           const HeatHistogram* start)
    : r_(r), heat_(start ? *start : HeatHistogram(r.layers, r.experts)) {
  if (heat_.layers() != r.layers || heat_.experts() != r.experts)
    fail("cache-sim: a heat histogram of ", heat_.layers(), " x ", heat_.experts(), " for a trace of ", r.layers, " x ",
         r.experts);
  if (pinned >= slots) fail("cache-sim: ", pinned, " of ", slots, " slots pinned leave none to evict");
  CacheOptions o;
  o.record_bytes = 1;
  o.buffers = false;
  o.slots = slots - pinned;
  o.pinned_slots = pinned;
  o.prefetch_reserve = static_cast<size_t>(r.top_k);
  o.experts_per_layer = r.experts;
  o.cycle_layers = r.moe_layers;
  o.heat = &heat_;
  o.policy = kind;
  o.top_k = r.top_k;
  cache_ = std::make_unique<ExpertCache>(o);
  // The pinned tier, filled from the starting heat (StreamingExpertSource::warm_pinned).
  for (const auto& [layer, expert] : heat_.hottest(pinned)) {
    const ExpertCache::Claim c = cache_->acquire_pinned(layer * r.experts + expert);
    if (c.outcome == ExpertCache::Outcome::Claimed) cache_->finish_load(c.slot, true, "");
  }
}

uint64_t PolicyReplay::step(const CacheReplay::Step& st) {
  const std::span<const int64_t> needed(r_.demands.data() + st.first, st.count);
  cache_->set_current_layer(st.layer, false);
  for (int64_t e : needed) heat_.add(st.layer, e);
  return demand_layer(*cache_, st.layer, r_.experts, needed);
}

void PolicyReplay::end_pass(int64_t positions) {
  heat_.decay(std::pow(kHeatDecayPerPosition, static_cast<double>(positions)));
}

CacheSimRow simulate_policy(const CacheReplay& r, CachePolicyKind kind, size_t slots, size_t pinned,
                            const HeatHistogram* start, bool with_prefill) {
  PolicyReplay replay(r, kind, slots, pinned, start);
  CacheSimRow row;
  row.slots = slots;
  row.pinned = pinned;
  row.policy = cache_policy_name(kind);
  for (const CacheReplay::Pass& p : r.passes) {
    const bool decode = r.decode(p);
    if (!decode && !with_prefill) continue;
    for (size_t s = p.first; s < p.first + p.count; ++s) count(row, decode, r.steps[s].count, replay.step(r.steps[s]));
    replay.end_pass(p.positions);
  }
  return row;
}

CacheSimRow simulate_belady(const CacheReplay& r, size_t slots, size_t warm, bool with_prefill) {
  // The demands in replay order, and for each the position of its key's next demand.
  struct Demand {
    int64_t key;
    size_t next;
  };
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  constexpr size_t kHeld = kNever - 1;
  std::vector<Demand> seq;
  std::vector<std::pair<size_t, size_t>> groups;  // [first, end) of each step in seq
  std::vector<char> decode_group;
  for (const CacheReplay::Pass& p : r.passes) {
    const bool decode = r.decode(p);
    if (!decode && !with_prefill) continue;
    for (size_t s = p.first; s < p.first + p.count; ++s) {
      const CacheReplay::Step& st = r.steps[s];
      // A layer's experts are held together: a step wider than the cache is
      // served in parts of `slots` experts.
      for (size_t at = 0; at < st.count; at += slots) {
        const size_t first = seq.size();
        for (size_t i = at; i < std::min(st.count, at + slots); ++i)
          seq.push_back({st.layer * r.experts + r.demands[st.first + i], kNever});
        groups.emplace_back(first, seq.size());
        decode_group.push_back(decode);
      }
    }
  }
  std::vector<size_t> upcoming(static_cast<size_t>(r.layers * r.experts), kNever);
  for (size_t i = seq.size(); i-- > 0;) {
    seq[i].next = upcoming[static_cast<size_t>(seq[i].key)];
    upcoming[static_cast<size_t>(seq[i].key)] = i;
  }
  // The resident keys by next demand, the furthest on top; an entry is stale
  // once its key has left or been demanded since (its next demand moved on).
  // A key of the running step has the nearest next demand of all (this step),
  // so the top is never one of them while another key is resident.
  std::vector<std::pair<size_t, int64_t>> heap;
  std::vector<size_t> resident_next(upcoming.size(), 0);
  std::vector<char> resident(upcoming.size(), 0);
  size_t used = 0;
  auto push = [&](size_t next, int64_t key) {
    heap.emplace_back(next, key);
    std::push_heap(heap.begin(), heap.end());
  };
  // The free start: the first `warm` distinct experts demanded.
  for (size_t i = 0; i < seq.size() && used < std::min(warm, slots); ++i) {
    const size_t k = static_cast<size_t>(seq[i].key);
    if (resident[k]) continue;
    resident[k] = 1;
    resident_next[k] = i;  // its first demand
    push(i, seq[i].key);
    ++used;
  }
  CacheSimRow row;
  row.slots = slots;
  row.policy = "belady";
  std::vector<int64_t> missed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [first, end] = groups[g];
    uint64_t hits = 0;
    missed.clear();
    for (size_t i = first; i < end; ++i) {
      if (resident[static_cast<size_t>(seq[i].key)]) ++hits;
      else missed.push_back(seq[i].key);
    }
    for (int64_t key : missed) {
      while (used == slots) {
        std::pop_heap(heap.begin(), heap.end());
        const auto [next, victim] = heap.back();
        heap.pop_back();
        const size_t v = static_cast<size_t>(victim);
        if (!resident[v] || resident_next[v] != next) continue;  // stale
        if (next < end && next >= first) fail("cache-sim: Belady found only the running layer's experts to evict");
        resident[v] = 0;
        --used;
      }
      resident[static_cast<size_t>(key)] = 1;
      resident_next[static_cast<size_t>(key)] = kHeld;  // no entry matches it until the step ends
      ++used;
    }
    for (size_t i = first; i < end; ++i) {
      const size_t k = static_cast<size_t>(seq[i].key);
      resident_next[k] = seq[i].next;
      push(seq[i].next, seq[i].key);
    }
    // Stale entries pile up: rebuild when they outnumber the live ones.
    if (heap.size() > 4 * slots + 1024) {
      std::vector<std::pair<size_t, int64_t>> live;
      for (const auto& e : heap)
        if (resident[static_cast<size_t>(e.second)] && resident_next[static_cast<size_t>(e.second)] == e.first)
          live.push_back(e);
      heap.swap(live);
      std::make_heap(heap.begin(), heap.end());
    }
    count(row, decode_group[g], end - first, hits);
  }
  return row;
}

std::vector<CacheSimRow> simulate(const CacheReplay& r, const CacheSimOptions& o) {
  struct Job {
    size_t slots;
    int policy;  // index into o.policies, -1 = Belady
  };
  std::vector<Job> jobs;
  for (size_t s : o.slots) {
    check_cache_size(r, s, o.pinned_fraction, cat("a cache of ", s, " slots"));
    for (size_t p = 0; p < o.policies.size(); ++p) jobs.push_back({s, static_cast<int>(p)});
    jobs.push_back({s, -1});
  }
  std::vector<CacheSimRow> rows(jobs.size());
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      try {
        const size_t pinned = pinned_slots_of(jobs[j].slots, o.pinned_fraction);
        rows[j] = jobs[j].policy < 0
                      ? simulate_belady(r, jobs[j].slots, pinned, o.with_prefill)
                      : simulate_policy(r, o.policies[static_cast<size_t>(jobs[j].policy)], jobs[j].slots, pinned,
                                        o.heat, o.with_prefill);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  const size_t n = std::min<size_t>(jobs.size(), static_cast<size_t>(std::max(1, o.threads)));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return rows;
}

}  // namespace deltafin
