#include "remote/expert_fetcher.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <limits>
#include <atomic>
#include <mutex>
#include <thread>

#include "format/mxfp4.h"
#include "remote/expert_ranges.h"
#include "store/install.h"
#include "store/store_files.h"
#include "util/crc32c.h"
#include "util/error.h"

namespace deltafin {

namespace {

struct Job {
  uint64_t ticket = 0;
  FetchRequest request;
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct ExpertFetcher::Impl {
  std::string store_dir;
  const StoreManifest& m;
  FetchOptions o;
  ExpertRanges ranges;
  HashJournal journal;
  uint64_t budget = 0;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> demand, prefetch;
  uint64_t next_ticket = 1;
  bool stopping = false;
  // Set by the destructor: transfers in flight stop at once (a stalled
  // mirror must not hold up shutdown for its timeouts and retries).
  std::atomic<bool> abandon{false};
  std::vector<uint8_t> local;      // [key]: file on every placement drive
  std::vector<uint16_t> holds;     // [key]: readers reading the file
  std::vector<uint8_t> busy;       // [key]: being fetched or installed
  std::vector<double> heat;        // eviction order; empty = evict lowest key first
  uint64_t used = 0;
  FetchCounters counters;
  std::vector<std::thread> workers;

  Impl(const std::string& dir, const StoreManifest& manifest, FetchOptions options)
      : store_dir(dir), m(manifest), o(std::move(options)), ranges(ExpertRanges::load(dir, manifest)),
        journal(dir, manifest.moe_layers, manifest.experts) {
    std::function<bool()> outer = o.http.cancelled;
    o.http.cancelled = [this, outer] { return abandon.load() || (outer && outer()); };
    budget = o.disk_budget_bytes ? *o.disk_budget_bytes : m.remote->disk_budget_bytes;
    const size_t n = static_cast<size_t>(m.layers * m.experts);
    local.assign(n, 0);
    holds.assign(n, 0);
    busy.assign(n, 0);
    scan_local();
  }

  size_t key(int64_t l, int64_t e) const { return static_cast<size_t>(l * m.experts + e); }
  uint64_t footprint(int64_t l, int64_t e) const { return m.expert_bytes * m.entry(l, e).drives.size(); }

  // What is already on the drives: a file of the right size on every
  // placement drive whose hash is known (record-then-install order means a
  // file without a recorded hash can only come from a store whose journal
  // was lost: it is fetched again rather than trusted). Temporaries are
  // swept by the pid rule: holding the store's lock exclusively here would
  // shut out the writes of other runs of the store; what a reused pid keeps
  // goes at the next setup.
  void scan_local() {
    for (const StoreDrive& d : m.drives)
      for (int64_t l : m.moe_layers) {
        const std::string dir = d.path + "/" + std::filesystem::path(expert_relative_path(l, 0)).parent_path().string();
        if (std::filesystem::is_directory(dir)) remove_stale_temps(dir);
      }
    for (int64_t l : m.moe_layers)
      for (int64_t e = 0; e < m.experts; ++e) {
        bool all = !m.entry(l, e).drives.empty();
        for (uint16_t d : m.entry(l, e).drives) all = all && has_size(m.expert_path(d, l, e), m.expert_bytes);
        if (all && known_hash(l, e)) {
          local[key(l, e)] = 1;
          used += footprint(l, e);
        }
      }
  }

  std::optional<ExpertHash> known_hash(int64_t l, int64_t e) const {
    const ExpertEntry& x = m.entry(l, e);
    if (x.hash_known) return ExpertHash{x.sha256, x.crc32c};
    return journal.get(l, e);
  }

  void worker() {
    HttpClient client(o.http);
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> g(mu);
        cv.wait(g, [&] { return stopping || !demand.empty() || !prefetch.empty(); });
        if (stopping) return;
        std::deque<Job>& q = demand.empty() ? prefetch : demand;
        job = std::move(q.front());
        q.pop_front();
        busy[key(job.request.layer, job.request.expert)] = 1;
      }
      run(job, client);
    }
  }

  // Downloads the record into dest by its merged ranges.
  void download(const FetchRequest& r, HttpClient& client) {
    uint64_t at = 0;
    for (const TensorRange& t : ranges.requests(r.layer, r.expert)) {
      const RemoteFile& f = m.remote->shards[t.shard];
      client.get_range(HttpClient::join(m.remote->url, f.name), t.offset, t.bytes, r.dest + at, f.etag, f.bytes);
      at += t.bytes;
    }
  }

  // Empty when the bytes in dest may be used; else why not.
  std::string check(const FetchRequest& r, ExpertHash* got) {
    got->sha256 = sha256(r.dest, m.expert_bytes);
    got->crc32c = crc32c(r.dest, m.expert_bytes);
    if (const auto want = known_hash(r.layer, r.expert)) {
      if (want->sha256 == got->sha256) return "";
      return cat("the bytes have SHA-256 ", to_hex(got->sha256), ", but ", to_hex(want->sha256), " is recorded for it (",
                 m.entry(r.layer, r.expert).hash_known ? "store.json" : "at its first fetch", ")");
    }
    try {
      uint64_t off = 0;
      for (size_t i = 0; i < o.matrices.size(); ++i) {
        const ExpertMatrixShape& s = o.matrices[i];
        const uint64_t packed = s.rows * s.cols / 2, scales = s.rows * s.cols / 32;
        validate_mxfp4(r.dest + off, r.dest + off + packed, s.rows, s.cols, cat("w", i + 1));
        off += packed + scales;
      }
    } catch (const Error& e) {
      return cat("the bytes are not valid MXFP4: ", e.what());
    }
    return "";
  }

  void run(Job& job, HttpClient& client) {
    const FetchRequest& r = job.request;
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t bytes0 = client.bytes_received(), retries0 = client.retries();
    ReadResult res;
    res.ticket = job.ticket;
    const std::string what = cat("layer ", r.layer, " expert ", r.expert, " from ", m.remote->url);
    bool got_bytes = false;
    uint64_t refused = 0;
    try {
      std::string why;
      ExpertHash h;
      for (int attempt = 1; attempt <= o.content_attempts && !got_bytes; ++attempt) {
        download(r, client);
        why = check(r, &h);
        got_bytes = why.empty();
        if (!got_bytes) ++refused;
      }
      if (!got_bytes)
        fail(what, ": refused after ", o.content_attempts, " fetches: ", why, " (nothing was installed)");
      journal.record(r.layer, r.expert, h);  // before the file exists, so a local file always has its hash
      res.ok = true;  // dest holds checked bytes: the caller may use them whatever happens to the drive copy
      try {
        install(r);
      } catch (const std::exception& e) {
        // A full or failing drive costs the copy, not the run: the expert is
        // fetched again when next needed. Said once per fetch in the counters.
        std::lock_guard<std::mutex> g(mu);
        ++counters.not_kept;
        ++counters.install_failed;
        counters.last_install_error = cat(what, ": ", e.what());
      }
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      res.error = msg.rfind(what, 0) == 0 ? msg : cat(what, ": ", msg);
    }
    {
      std::lock_guard<std::mutex> g(mu);
      busy[key(r.layer, r.expert)] = 0;
      counters.bytes += client.bytes_received() - bytes0;
      counters.retries += client.retries() - retries0;
      counters.refused += refused;
      counters.seconds += since(t0);
      if (res.ok) ++counters.fetched;
      else ++counters.failed;
    }
    r.on_done(res);
  }

  // Makes room under the budget (or finds there is none) and writes the
  // expert's file on each placement drive. Victims are unlinked under the
  // lock: none is read (holds) or fetched (busy) then, and none can become so
  // before its file is gone.
  void install(const FetchRequest& r) {
    const size_t k = key(r.layer, r.expert);
    const uint64_t need = footprint(r.layer, r.expert);
    // Held shared while this expert's temporaries exist, so a setup's sweep
    // (which holds it exclusively) never meets a live one. While a setup
    // rewrites the store nothing is written or evicted: the bytes are used,
    // not kept.
    const StoreWriteLock lock(store_dir);
    if (!lock.held())
      fail("not kept: a deltafin setup is rewriting the store (", store_lock_path(store_dir), " is held)");
    {
      std::lock_guard<std::mutex> g(mu);
      if (local[k]) return;
      if (budget && used + need > budget) {
        // Evict only when that makes room: otherwise keep what is there.
        uint64_t evictable = 0;
        for (size_t i = 0; i < local.size(); ++i)
          if (local[i] && !holds[i] && !busy[i] && i != k)
            evictable += footprint(static_cast<int64_t>(i) / m.experts, static_cast<int64_t>(i) % m.experts);
        if (need > budget || used - evictable + need > budget) {
          ++counters.not_kept;
          return;
        }
      }
      while (budget && used + need > budget) {
        const size_t v = coldest_victim(k);
        if (v == std::numeric_limits<size_t>::max()) break;
        evict_locked(static_cast<int64_t>(v) / m.experts, static_cast<int64_t>(v) % m.experts);
      }
      used += need;  // reserved while writing
    }
    try {
      for (uint16_t d : m.entry(r.layer, r.expert).drives) {
        const std::string path = m.expert_path(d, r.layer, r.expert);
        std::filesystem::create_directories(std::filesystem::path(path).parent_path());
        // Compares the bytes read back from the drive with the ones given.
        write_verified(path, [&](const ByteSink& out) { out(r.dest, m.expert_bytes); }, m.expert_bytes);
      }
    } catch (...) {
      // A copy written to an earlier drive of the placement is removed: the
      // expert is local on all its drives or on none.
      for (uint16_t d : m.entry(r.layer, r.expert).drives) ::unlink(m.expert_path(d, r.layer, r.expert).c_str());
      std::lock_guard<std::mutex> g(mu);
      used -= need;
      throw;
    }
    std::lock_guard<std::mutex> g(mu);
    local[k] = 1;
  }

  // The local expert with the least heat that nobody reads or fetches.
  size_t coldest_victim(size_t except) const {
    size_t best = std::numeric_limits<size_t>::max();
    double best_heat = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < local.size(); ++i) {
      if (!local[i] || holds[i] || busy[i] || i == except) continue;
      const double h = i < heat.size() ? heat[i] : 0.0;
      if (h < best_heat) best = i, best_heat = h;
    }
    return best;
  }

  // The expert stops being local first; an unlink that fails leaves a stray
  // file (counted), never an entry pointing at a missing one.
  void evict_locked(int64_t l, int64_t e) {
    local[key(l, e)] = 0;
    for (uint16_t d : m.entry(l, e).drives)
      if (::unlink(m.expert_path(d, l, e).c_str()) != 0 && errno != ENOENT) ++counters.evict_failed;
    used -= footprint(l, e);
    ++counters.evicted;
    counters.evicted_bytes += footprint(l, e);
  }
};

ExpertFetcher::ExpertFetcher(const std::string& store_dir, const StoreManifest& m, FetchOptions options) {
  if (!m.remote) fail(store_dir, "/store.json: the store has no mirror (it was not set up with --stream or --full)");
  if (options.threads < 1) fail("--fetch-threads: ", options.threads, " (must be >= 1)");
  http_global_init();
  impl_ = std::make_unique<Impl>(store_dir, m, std::move(options));
  for (int i = 0; i < impl_->o.threads; ++i) impl_->workers.emplace_back([this] { impl_->worker(); });
}

ExpertFetcher::~ExpertFetcher() {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->stopping = true;
    impl_->abandon = true;
    for (auto* q : {&impl_->demand, &impl_->prefetch})
      while (!q->empty()) dropped.push_back(std::move(q->front())), q->pop_front();
  }
  impl_->cv.notify_all();
  for (std::thread& t : impl_->workers) t.join();
  for (Job& j : dropped) {
    ReadResult res;
    res.ticket = j.ticket;
    res.cancelled = true;
    j.request.on_done(res);
  }
}

bool ExpertFetcher::is_local(int64_t layer, int64_t expert) const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->local[impl_->key(layer, expert)];
}

bool ExpertFetcher::hold_local(int64_t layer, int64_t expert) {
  std::lock_guard<std::mutex> g(impl_->mu);
  const size_t k = impl_->key(layer, expert);
  if (!impl_->local[k]) return false;
  ++impl_->holds[k];
  return true;
}

void ExpertFetcher::release_local(int64_t layer, int64_t expert) {
  std::lock_guard<std::mutex> g(impl_->mu);
  const size_t k = impl_->key(layer, expert);
  if (impl_->holds[k] == 0) fail("ExpertFetcher: release_local without hold (layer ", layer, ", expert ", expert, ")");
  --impl_->holds[k];
}

std::optional<ExpertHash> ExpertFetcher::hash(int64_t layer, int64_t expert) const {
  return impl_->known_hash(layer, expert);
}

uint64_t ExpertFetcher::submit(FetchRequest request) {
  if (!request.dest) fail("ExpertFetcher::submit: no destination buffer");
  impl_->m.entry(request.layer, request.expert);  // range check, named error
  if (!impl_->m.is_moe_layer(request.layer)) fail("ExpertFetcher::submit: layer ", request.layer, " has no routed experts");
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    ticket = impl_->next_ticket++;
    auto& q = request.priority == ReadPriority::Demand ? impl_->demand : impl_->prefetch;
    q.push_back(Job{ticket, std::move(request)});
  }
  impl_->cv.notify_one();
  return ticket;
}

void ExpertFetcher::promote(uint64_t ticket) {
  std::lock_guard<std::mutex> g(impl_->mu);
  auto& q = impl_->prefetch;
  auto it = std::find_if(q.begin(), q.end(), [&](const Job& j) { return j.ticket == ticket; });
  if (it == q.end()) return;
  it->request.priority = ReadPriority::Demand;
  impl_->demand.push_back(std::move(*it));
  q.erase(it);
}

bool ExpertFetcher::cancel(uint64_t ticket) {
  Job job;
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    auto& q = impl_->prefetch;
    auto it = std::find_if(q.begin(), q.end(), [&](const Job& j) { return j.ticket == ticket; });
    if (it == q.end()) return false;
    job = std::move(*it);
    q.erase(it);
  }
  ReadResult res;
  res.ticket = ticket;
  res.cancelled = true;
  job.request.on_done(res);
  return true;
}

void ExpertFetcher::set_heat(const HeatHistogram& heat) {
  std::vector<double> h(impl_->local.size(), 0.0);
  if (heat.layers() == impl_->m.layers && heat.experts() == impl_->m.experts)
    for (int64_t l = 0; l < heat.layers(); ++l)
      for (int64_t e = 0; e < heat.experts(); ++e) h[impl_->key(l, e)] = heat.at(l, e);
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->heat = std::move(h);
}

FetchCounters ExpertFetcher::counters() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->counters;
}

uint64_t ExpertFetcher::disk_used_bytes() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->used;
}

uint64_t ExpertFetcher::disk_budget_bytes() const { return impl_->budget; }

size_t ExpertFetcher::local_experts() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return static_cast<size_t>(std::count(impl_->local.begin(), impl_->local.end(), 1));
}

const std::string& ExpertFetcher::url() const { return impl_->m.remote->url; }

const std::vector<std::string>& ExpertFetcher::damaged_hash_slots() const { return impl_->journal.damaged(); }

}  // namespace deltafin
