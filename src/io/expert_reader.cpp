// The expert reader's scheduler. One mutex guards all request and drive state;
// backends (io/chunk_io.h) only run chunks and report back. Threads:
//   - the engine's threads call submit/promote/cancel;
//   - backend threads (a pread pool or one io_uring thread) run chunks and call
//     chunk_finished, which frees a drive slot and dispatches more chunks;
//   - "finisher" threads check CRC-32C of landed records (a core's worth of
//     work per ~10 GB/s, kept off the ring thread) and call on_done, always
//     without the mutex held, so a callback may submit, promote or cancel.
//
// Dispatch is late: a chunk is bound to a drive only when that drive has a
// free slot (fewer than queue_depth chunks in flight). A drive takes, in order:
// the oldest prefetch if it has waited longer than prefetch_max_wait_s since
// its last chunk started and a demand read is waiting (anti-starvation); else
// the first demand read it may serve; else the first prefetch. A read with
// several candidate drives is served by a drive only if no other candidate has
// a smaller expected completion time (in-flight bytes + bytes queued for it
// alone + this chunk, over the drive's estimated bandwidth); the better drive
// takes it when it frees a slot, so every chunk has a taker and the chunks of a
// replicated read may spread over its replicas.
//
// A failed chunk (open, size, I/O, short read) marks its drive failed for that
// read; a CRC mismatch marks the drive that served the whole record, or, when
// the record was split over drives, retries it unsplit (one drive) to find
// which copy is bad. The whole record is then read again from the replicas
// not yet failed, and fails with every drive's error when none is left.
#include "io/expert_reader.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "io/aligned_buffer.h"
#include "io/chunk_io.h"
#include "util/crc32c.h"
#include "util/error.h"

namespace deltafin {

const char* io_engine_name(IoEngine e) { return e == IoEngine::Uring ? "uring" : "pread"; }

IoEngine parse_io_engine(const std::string& name) {
  if (name == "uring") return IoEngine::Uring;
  if (name == "pread") return IoEngine::Pread;
  fail("unknown I/O engine \"", name, "\" (choices: uring, pread)");
}

namespace {

using io_detail::ChunkJob;
using io_detail::ChunkOutcome;

constexpr int kDemand = 0, kPrefetch = 1;
// Bandwidth estimate: an EMA over samples of bytes per busy second, each sample
// covering at least this much busy time (shorter ones are noise).
constexpr double kBandwidthSampleS = 0.05;
constexpr double kBandwidthAlpha = 0.25;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

struct Req {
  uint64_t ticket = 0;
  ReadRequest rq;
  int cls = kDemand;  // the queues it is in now (a promoted prefetch is demand)
  bool submitted_prefetch = false, promoted = false;
  uint32_t gen = 0;  // bumped when it is queued anew; older queue entries are stale
  size_t n_chunks = 1;
  // The current attempt (one pass over the whole record):
  size_t next_chunk = 0, done_chunks = 0;
  int in_flight = 0;
  bool attempt_failed = false;  // a chunk failed: start no more, retry when in_flight == 0
  bool verifying = false;       // all chunks landed, CRC being checked
  bool no_split = false;        // a split read failed its CRC: one drive per attempt from now on
  int pinned_drive = -1;        // with no_split, the drive this attempt uses
  std::vector<uint64_t> served; // per replica: bytes this attempt
  std::vector<char> used;       // per replica: served a chunk this attempt
  // Over all attempts:
  std::vector<char> failed;     // per replica
  std::vector<std::string> errors;
  bool started = false;
  bool aborted = false;  // a started prefetch no longer wanted: no more chunks, cancelled when in_flight == 0
  double enqueue_s = 0, start_s = 0, wait_since = 0;
  // What this request adds to the drives' queued-bytes accounting now.
  int acc_drive = -1, acc_cls = 0;
  uint64_t acc_bytes = 0;
};

// "layer L expert E: drive D (root) path: what; ..." for every replica that failed.
std::string failures(const Req& r) {
  std::string msg = cat("layer ", r.rq.layer, " expert ", r.rq.expert, ": ");
  for (size_t i = 0; i < r.errors.size(); ++i) msg += (i ? "; " : "") + r.errors[i];
  return msg;
}

struct QEntry {
  uint64_t ticket;
  uint32_t gen;
};

struct Drive {
  DriveSpec spec;
  std::unique_ptr<io_detail::DriveFiles> files;
  double est_bps = 0;
  int in_flight = 0, prefetch_in_flight = 0;
  uint64_t in_flight_bytes = 0;
  uint64_t queued[2] = {0, 0};  // unstarted bytes of reads that can go only here, per class
  std::deque<QEntry> q[2];      // reads that may be served here, per class, in order
  // Bandwidth estimation.
  double mark_s = 0, acc_busy_s = 0;
  uint64_t acc_bytes = 0;
  // Counters (also kept by the Monitor when there is one).
  DriveCounters counters;
  double busy_since = -1;
};

struct Task {
  Req* verify = nullptr;  // check this request's CRC, or else deliver:
  std::function<void(const ReadResult&)> on_done;
  ReadResult result;
  ReadRecord record;
};

}  // namespace

struct ExpertReader::Impl final : io_detail::ChunkSink {
  Impl(std::vector<DriveSpec> specs, ReaderOptions opts, Monitor* mon);
  ~Impl();

  uint64_t submit(ReadRequest request);
  void promote(uint64_t ticket);
  bool cancel(uint64_t ticket);
  bool abort(uint64_t ticket);
  void pause(bool paused);
  std::vector<DriveStatus> status() const;
  void chunk_finished(const ChunkJob& job, ChunkOutcome outcome) override;

  double now() const {
    return monitor ? monitor->now() : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // All below: with mu held.
  Req* find(uint64_t ticket) const {
    auto it = reqs.find(ticket);
    return it == reqs.end() ? nullptr : it->second.get();
  }
  static int replica_of(const Req& r, int drive) {
    for (size_t i = 0; i < r.rq.drives.size(); ++i)
      if (r.rq.drives[i] == drive) return static_cast<int>(i);
    return -1;
  }
  uint64_t chunk_len(const Req& r, size_t i) const {
    const uint64_t off = i * opts.chunk_bytes;
    return off >= r.rq.bytes ? 0 : std::min(opts.chunk_bytes, r.rq.bytes - off);
  }
  bool queued(const Req& r) const {
    return !r.attempt_failed && !r.verifying && !r.aborted && r.next_chunk < r.n_chunks;
  }
  int candidate_count(const Req& r) const {
    int n = 0;
    for (char f : r.failed) n += !f;
    return n;
  }
  int only_drive(const Req& r) const;  // the one drive that may serve r's next chunk, or -1
  void reaccount(Req& r);
  void unaccount(Req& r);
  double eta(int d, int cls, uint64_t len) const {
    const Drive& dr = drives[static_cast<size_t>(d)];
    uint64_t ahead = dr.in_flight_bytes + dr.queued[kDemand] + (cls == kPrefetch ? dr.queued[kPrefetch] : 0);
    return static_cast<double>(ahead + len) / dr.est_bps;
  }
  int best_drive(const Req& r, int prefer) const;
  bool may_serve(const Req& r, int d) const;
  Req* first_for(int d, int cls);
  void enqueue(Req& r, bool front);
  void dispatch();
  void take(Req& r, int d);
  void landed(Req& r);
  void verified(Req& r, uint32_t got);
  void retry_or_fail(Req& r);
  void finish(Req& r, bool ok, bool cancelled, std::string error);
  void finisher_loop();

  std::vector<Drive> drives;
  ReaderOptions opts;
  Monitor* monitor;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  IoEngine engine = IoEngine::Pread;
  std::string engine_note;
  std::unique_ptr<io_detail::Backend> backend;

  mutable std::mutex mu;
  std::unordered_map<uint64_t, std::unique_ptr<Req>> reqs;
  uint64_t next_ticket = 1;
  uint64_t outstanding = 0;  // submitted, on_done not yet returned
  bool paused = false, closing = false, finisher_stop = false;
  std::deque<Task> tasks;
  std::condition_variable tasks_cv, idle_cv;
  std::vector<std::thread> finishers;
};

ExpertReader::Impl::Impl(std::vector<DriveSpec> specs, ReaderOptions o, Monitor* mon) : opts(o), monitor(mon) {
  if (specs.empty()) fail("expert reader: no drives");
  if (opts.queue_depth < 1 || opts.queue_depth > 1024)
    fail("expert reader: queue depth ", opts.queue_depth, " is out of range (1..1024)");
  if (opts.prefetch_depth < 1 || opts.prefetch_depth > opts.queue_depth)
    fail("expert reader: prefetch depth ", opts.prefetch_depth, " is out of range (1..queue depth ", opts.queue_depth, ")");
  if (opts.chunk_bytes == 0 || opts.chunk_bytes % kDirectAlign != 0)
    fail("expert reader: chunk size ", opts.chunk_bytes, " is not a positive multiple of ", kDirectAlign);
  if (!(opts.prefetch_max_wait_s >= 0)) fail("expert reader: prefetch_max_wait_s must be >= 0");
  drives.resize(specs.size());
  std::vector<io_detail::DriveFiles*> files;
  for (size_t d = 0; d < specs.size(); ++d) {
    if (!(specs[d].read_bytes_per_s > 0))
      fail("expert reader: drive ", d, " (", specs[d].path, ") has bandwidth ", specs[d].read_bytes_per_s,
           "; it must be > 0");
    drives[d].spec = specs[d];
    drives[d].est_bps = specs[d].read_bytes_per_s;
    drives[d].files = std::make_unique<io_detail::DriveFiles>(opts.direct, specs[d].path);
    files.push_back(drives[d].files.get());
  }
  if (opts.engine == IoEngine::Uring) {
    std::string why;
    backend = io_detail::make_uring_backend(files, opts.queue_depth, *this, &why);
    if (backend)
      engine = IoEngine::Uring;
    else
      engine_note = cat("io_uring unavailable (", why, "); using the pread pool");
  }
  if (!backend) backend = io_detail::make_pread_backend(files, opts.queue_depth, *this);
  int n = opts.verify_threads;
  if (n <= 0) {
    const int cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    n = std::min(static_cast<int>(drives.size()), cpus);
  }
  for (int i = 0; i < n; ++i) finishers.emplace_back([this] { finisher_loop(); });
}

ExpertReader::Impl::~Impl() {
  {
    std::unique_lock<std::mutex> lock(mu);
    closing = true;
    paused = false;
    std::vector<Req*> drop;
    for (auto& [ticket, r] : reqs)
      if (r->cls == kPrefetch && !r->started) drop.push_back(r.get());
    for (Req* r : drop) finish(*r, false, true, {});
    dispatch();
    idle_cv.wait(lock, [&] { return outstanding == 0; });
    finisher_stop = true;
  }
  tasks_cv.notify_all();
  backend->stop();
  for (auto& t : finishers) t.join();
}

int ExpertReader::Impl::only_drive(const Req& r) const {
  if (r.no_split && r.pinned_drive >= 0) return r.pinned_drive;
  if (candidate_count(r) != 1) return -1;
  for (size_t i = 0; i < r.failed.size(); ++i)
    if (!r.failed[i]) return r.rq.drives[i];
  return -1;
}

void ExpertReader::Impl::unaccount(Req& r) {
  if (r.acc_drive >= 0) drives[static_cast<size_t>(r.acc_drive)].queued[r.acc_cls] -= r.acc_bytes;
  r.acc_drive = -1;
  r.acc_bytes = 0;
}

// Recomputes what r adds to its drive's queued bytes (after any change to it).
void ExpertReader::Impl::reaccount(Req& r) {
  unaccount(r);
  if (!queued(r)) return;
  const int d = only_drive(r);
  if (d < 0) return;
  uint64_t bytes = 0;
  for (size_t i = r.next_chunk; i < r.n_chunks; ++i) bytes += chunk_len(r, i);
  r.acc_drive = d;
  r.acc_cls = r.cls;
  r.acc_bytes = bytes;
  drives[static_cast<size_t>(d)].queued[r.cls] += bytes;
}

// The candidate drive expected to finish r's next chunk first; ties go to
// `prefer` (the drive asking), then to the earlier replica.
int ExpertReader::Impl::best_drive(const Req& r, int prefer) const {
  const uint64_t len = chunk_len(r, r.next_chunk);
  int best = -1;
  double best_eta = 0;
  for (size_t i = 0; i < r.rq.drives.size(); ++i) {
    if (r.failed[i]) continue;
    const int d = r.rq.drives[i];
    const double e = eta(d, r.cls, len);
    if (best < 0 || e < best_eta || (e == best_eta && d == prefer)) {
      best = d;
      best_eta = e;
    }
  }
  return best;
}

bool ExpertReader::Impl::may_serve(const Req& r, int d) const {
  if (!queued(r)) return false;
  const int ri = replica_of(r, d);
  if (ri < 0 || r.failed[static_cast<size_t>(ri)]) return false;
  const int only = only_drive(r);
  if (only >= 0) return only == d;
  return best_drive(r, d) == d;
}

// The first read in drive d's queue of class cls that d may serve now; stale
// entries at the front are dropped on the way.
Req* ExpertReader::Impl::first_for(int d, int cls) {
  auto& q = drives[static_cast<size_t>(d)].q[cls];
  auto live = [&](const QEntry& e) -> Req* {
    Req* r = find(e.ticket);
    return r && r->gen == e.gen && r->cls == cls && queued(*r) ? r : nullptr;
  };
  while (!q.empty() && !live(q.front())) q.pop_front();
  for (const QEntry& e : q) {
    Req* r = live(e);
    if (r && may_serve(*r, d)) return r;
  }
  return nullptr;
}

void ExpertReader::Impl::enqueue(Req& r, bool front) {
  ++r.gen;
  for (size_t i = 0; i < r.rq.drives.size(); ++i) {
    if (r.failed[i]) continue;
    auto& q = drives[static_cast<size_t>(r.rq.drives[i])].q[r.cls];
    if (front)
      q.push_front({r.ticket, r.gen});
    else
      q.push_back({r.ticket, r.gen});
  }
}

void ExpertReader::Impl::dispatch() {
  if (paused) return;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t di = 0; di < drives.size(); ++di) {
      const int d = static_cast<int>(di);
      if (drives[di].in_flight >= opts.queue_depth) continue;
      Req* demand = first_for(d, kDemand);
      Req* prefetch = first_for(d, kPrefetch);
      const bool starved = demand && prefetch && now() - prefetch->wait_since > opts.prefetch_max_wait_s;
      if (prefetch && !starved && drives[di].prefetch_in_flight >= opts.prefetch_depth) prefetch = nullptr;
      Req* pick = demand ? demand : prefetch;
      if (starved) pick = prefetch;
      if (!pick) continue;
      take(*pick, d);
      progress = true;
    }
  }
}

void ExpertReader::Impl::take(Req& r, int d) {
  Drive& dr = drives[static_cast<size_t>(d)];
  const size_t i = r.next_chunk++;
  const uint64_t off = i * opts.chunk_bytes, len = chunk_len(r, i);
  if (r.no_split && r.pinned_drive < 0) r.pinned_drive = d;
  reaccount(r);
  const double t = now();
  if (!r.started) {
    r.started = true;
    r.start_s = t;
  }
  r.wait_since = t;
  ++r.in_flight;
  if (dr.in_flight++ == 0) {
    dr.mark_s = t;
    dr.busy_since = t;
    if (monitor) monitor->drive_busy(d, t, true);
  }
  dr.in_flight_bytes += len;
  const int ri = replica_of(r, d);
  r.used[static_cast<size_t>(ri)] = 1;
  ChunkJob job;
  job.owner = &r;
  job.drive = d;
  job.path = &r.rq.paths[static_cast<size_t>(ri)];
  job.dst = r.rq.dest + off;
  job.offset = off;
  job.len = len;
  job.file_bytes = r.rq.bytes;
  job.prefetch = r.cls == kPrefetch;
  if (job.prefetch) ++dr.prefetch_in_flight;
  backend->start(job);
}

void ExpertReader::Impl::chunk_finished(const ChunkJob& job, ChunkOutcome out) {
  std::lock_guard<std::mutex> lock(mu);
  const double t = now();
  Drive& dr = drives[static_cast<size_t>(job.drive)];
  dr.in_flight_bytes -= job.len;
  if (job.prefetch) --dr.prefetch_in_flight;
  dr.acc_busy_s += t - dr.mark_s;
  dr.mark_s = t;
  dr.acc_bytes += out.transferred;
  if (dr.acc_busy_s >= kBandwidthSampleS) {
    const double sample = static_cast<double>(dr.acc_bytes) / dr.acc_busy_s;
    if (sample > 0) dr.est_bps += kBandwidthAlpha * (sample - dr.est_bps);
    dr.acc_busy_s = 0;
    dr.acc_bytes = 0;
  }
  dr.counters.bytes += out.transferred;
  ++dr.counters.reads;
  if (monitor) monitor->chunk_done(job.drive, t, out.transferred);
  if (--dr.in_flight == 0) {
    dr.counters.busy_s += t - dr.busy_since;
    dr.busy_since = -1;
    if (monitor) monitor->drive_busy(job.drive, t, false);
  }

  Req& r = *static_cast<Req*>(job.owner);
  --r.in_flight;
  const size_t ri = static_cast<size_t>(replica_of(r, job.drive));
  if (out.ok) {
    r.served[ri] += job.len;
    ++r.done_chunks;
  } else {
    if (!r.failed[ri]) {
      r.failed[ri] = 1;
      r.errors.push_back(cat("drive ", job.drive, " (", dr.spec.path, ") ", *job.path, ": ", out.error));
    }
    r.attempt_failed = true;
    reaccount(r);
  }
  if (r.in_flight == 0) {
    if (r.aborted)
      finish(r, false, true, {});
    else if (r.attempt_failed)
      retry_or_fail(r);
    else if (r.done_chunks == r.n_chunks)
      landed(r);
  }
  dispatch();
}

void ExpertReader::Impl::landed(Req& r) {
  if (!r.rq.crc32c) {
    finish(r, true, false, {});
    return;
  }
  r.verifying = true;
  reaccount(r);
  Task task;
  task.verify = &r;
  tasks.push_back(std::move(task));
  tasks_cv.notify_one();
}

void ExpertReader::Impl::verified(Req& r, uint32_t got) {
  r.verifying = false;
  const uint32_t want = *r.rq.crc32c;
  if (got == want) {
    finish(r, true, false, {});
    return;
  }
  int used = 0;
  size_t last = 0;
  for (size_t i = 0; i < r.used.size(); ++i)
    if (r.used[i]) ++used, last = i;
  if (used == 1) {
    const int d = r.rq.drives[last];
    r.failed[last] = 1;
    r.errors.push_back(cat("drive ", d, " (", drives[static_cast<size_t>(d)].spec.path, ") ", r.rq.paths[last],
                           ": CRC-32C mismatch (got ", hex32(got), ", expected ", hex32(want), ")"));
  } else {
    r.no_split = true;  // which copy is bad is unknown: read it again from one drive at a time
  }
  retry_or_fail(r);
}

void ExpertReader::Impl::retry_or_fail(Req& r) {
  if (candidate_count(r) == 0) {
    finish(r, false, false, failures(r) + "; no replica left");
    return;
  }
  r.next_chunk = 0;
  r.done_chunks = 0;
  r.attempt_failed = false;
  r.pinned_drive = -1;
  std::fill(r.served.begin(), r.served.end(), 0);
  std::fill(r.used.begin(), r.used.end(), 0);
  reaccount(r);
  enqueue(r, /*front=*/true);
}

void ExpertReader::Impl::finish(Req& r, bool ok, bool cancelled, std::string error) {
  unaccount(r);
  const double t = now();
  Task task;
  task.on_done = std::move(r.rq.on_done);
  task.result.ticket = r.ticket;
  task.result.ok = ok;
  task.result.cancelled = cancelled;
  task.result.error = error;
  ReadRecord& rec = task.record;
  rec.layer = r.rq.layer;
  rec.expert = r.rq.expert;
  rec.prefetch = r.submitted_prefetch;
  rec.promoted = r.promoted;
  rec.ok = ok;
  rec.cancelled = cancelled;
  rec.enqueue_s = r.enqueue_s;
  rec.start_s = r.started ? r.start_s : t;
  rec.end_s = t;
  rec.bytes = r.rq.bytes;
  rec.error = std::move(error);
  uint64_t most = 0;
  for (size_t i = 0; i < r.rq.drives.size(); ++i) {
    // ok: the drives that served this (the last) attempt; failed: every drive tried.
    if (!(ok ? r.used[i] : r.failed[i])) continue;
    rec.drives.push_back(r.rq.drives[i]);
    if (rec.drive < 0 || r.served[i] > most) {
      rec.drive = r.rq.drives[i];
      most = r.served[i];
    }
  }
  std::sort(rec.drives.begin(), rec.drives.end());
  if (ok && !r.errors.empty()) {
    std::string served;
    for (int d : rec.drives) served += cat(served.empty() ? "" : ", ", d);
    task.result.recovered = rec.error = failures(r) + "; read from drive " + served + " instead";
  }
  reqs.erase(r.ticket);  // r is gone
  tasks.push_back(std::move(task));
  tasks_cv.notify_one();
}

void ExpertReader::Impl::finisher_loop() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    tasks_cv.wait(lock, [&] { return !tasks.empty() || finisher_stop; });
    if (tasks.empty()) return;
    Task task = std::move(tasks.front());
    tasks.pop_front();
    if (task.verify) {
      Req& r = *task.verify;  // stays while verifying: nothing else touches it
      lock.unlock();
      const uint32_t got = crc32c(r.rq.dest, r.rq.bytes);
      lock.lock();
      verified(r, got);
      dispatch();
      continue;
    }
    lock.unlock();
    if (monitor) monitor->read_done(task.record);
    if (task.on_done) task.on_done(task.result);
    task = Task();  // the callback's captures die outside the lock
    lock.lock();
    if (--outstanding == 0) idle_cv.notify_all();
  }
}

uint64_t ExpertReader::Impl::submit(ReadRequest rq) {
  const std::string what = cat("read of layer ", rq.layer, " expert ", rq.expert);
  if (rq.drives.empty()) fail(what, ": no drives");
  if (rq.drives.size() != rq.paths.size())
    fail(what, ": ", rq.drives.size(), " drives but ", rq.paths.size(), " paths");
  for (size_t i = 0; i < rq.drives.size(); ++i) {
    if (rq.drives[i] < 0 || static_cast<size_t>(rq.drives[i]) >= drives.size())
      fail(what, ": drive index ", rq.drives[i], " is out of range (", drives.size(), " drives)");
    for (size_t j = 0; j < i; ++j)
      if (rq.drives[j] == rq.drives[i]) fail(what, ": drive ", rq.drives[i], " is listed twice");
  }
  if (rq.bytes > 0 && !rq.dest) fail(what, ": no destination buffer");
  if (reinterpret_cast<uintptr_t>(rq.dest) % kDirectAlign != 0)
    fail(what, ": destination buffer is not ", kDirectAlign, "-byte aligned");

  auto owned = std::make_unique<Req>();
  Req& r = *owned;
  r.rq = std::move(rq);
  r.submitted_prefetch = r.rq.priority == ReadPriority::Prefetch;
  r.cls = r.submitted_prefetch ? kPrefetch : kDemand;
  r.n_chunks = std::max<uint64_t>(1, (r.rq.bytes + opts.chunk_bytes - 1) / opts.chunk_bytes);
  r.served.assign(r.rq.drives.size(), 0);
  r.failed.assign(r.rq.drives.size(), 0);
  r.used.assign(r.rq.drives.size(), 0);

  std::lock_guard<std::mutex> lock(mu);
  r.ticket = next_ticket++;
  r.enqueue_s = r.wait_since = now();
  const uint64_t ticket = r.ticket;
  reqs.emplace(ticket, std::move(owned));
  ++outstanding;
  if (closing && r.cls == kPrefetch) {
    finish(r, false, true, {});
    return ticket;
  }
  enqueue(r, /*front=*/false);
  reaccount(r);
  dispatch();
  return ticket;
}

void ExpertReader::Impl::promote(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu);
  Req* r = find(ticket);
  if (!r || !r->submitted_prefetch || r->promoted || r->aborted) return;
  r->promoted = true;
  r->cls = kDemand;
  reaccount(*r);
  if (queued(*r)) enqueue(*r, /*front=*/false);
  dispatch();
}

bool ExpertReader::Impl::cancel(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu);
  Req* r = find(ticket);
  if (!r || r->cls != kPrefetch || r->started) return false;
  finish(*r, false, true, {});
  return true;
}

bool ExpertReader::Impl::abort(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu);
  Req* r = find(ticket);
  if (!r || r->cls != kPrefetch || r->verifying || r->aborted) return false;
  if (!r->started || r->in_flight == 0) {
    finish(*r, false, true, {});
  } else {
    r->aborted = true;  // its in-flight chunks finish; then chunk_finished cancels it
    ++r->gen;
    unaccount(*r);
  }
  dispatch();
  return true;
}

void ExpertReader::Impl::pause(bool p) {
  std::lock_guard<std::mutex> lock(mu);
  paused = p && !closing;
  dispatch();
}

std::vector<DriveStatus> ExpertReader::Impl::status() const {
  std::lock_guard<std::mutex> lock(mu);
  const double t = now();
  std::vector<DriveStatus> out;
  for (const Drive& dr : drives) {
    DriveStatus s;
    s.path = dr.spec.path;
    s.est_bytes_per_s = dr.est_bps;
    s.queued_bytes = dr.in_flight_bytes + dr.queued[kDemand] + dr.queued[kPrefetch];
    s.in_flight = dr.in_flight;
    s.direct = dr.files->direct();
    s.note = dr.files->note();
    s.counters = dr.counters;
    if (dr.busy_since >= 0) s.counters.busy_s += t - dr.busy_since;
    out.push_back(std::move(s));
  }
  return out;
}

ExpertReader::ExpertReader(std::vector<DriveSpec> drives, ReaderOptions options, Monitor* monitor)
    : impl_(std::make_unique<Impl>(std::move(drives), options, monitor)) {}
ExpertReader::~ExpertReader() = default;
uint64_t ExpertReader::submit(ReadRequest request) { return impl_->submit(std::move(request)); }
void ExpertReader::promote(uint64_t ticket) { impl_->promote(ticket); }
bool ExpertReader::cancel(uint64_t ticket) { return impl_->cancel(ticket); }
bool ExpertReader::abort(uint64_t ticket) { return impl_->abort(ticket); }
void ExpertReader::pause_dispatch(bool paused) { impl_->pause(paused); }
IoEngine ExpertReader::engine() const { return impl_->engine; }
const std::string& ExpertReader::engine_note() const { return impl_->engine_note; }
std::vector<DriveStatus> ExpertReader::drive_status() const { return impl_->status(); }

}  // namespace deltafin
