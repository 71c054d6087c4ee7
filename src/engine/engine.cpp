#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <list>
#include <mutex>
#include <thread>

#include "engine/generate.h"
#include "load/loaded_model.h"
#include "engine/prefill.h"
#include "engine/prefill_estimate.h"
#include "engine/prompt_cache.h"
#include "engine/prompt_disk_cache.h"
#include "engine/stats_collector.h"
#include "model/loaders/drafter_factory.h"
#include "model/loaders/family_loaders.h"
#include "engine/speculative_generate.h"
#include "engine/step_scheduler.h"
#include "util/error.h"

namespace deltafin {

using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// 80 % of the RAM nobody else has claimed: store runs take the memory plan's
// figures (measured before the expert cache filled), resident runs what is
// available now that every weight is loaded. The prompt cache's budget is
// set aside as well: its kept states live beside the running one.
uint64_t derived_session_budget(const LoadedModel& m, uint64_t prompt_cache_bytes) {
  uint64_t free_bytes = 0;
  if (m.stream) {
    const MemoryPlan& p = m.memory;
    const uint64_t used = p.spine_bytes + p.cache_bytes() + p.pinned_bytes();
    free_bytes = p.ram_available > used ? p.ram_available - used : 0;
  } else {
    free_bytes = available_ram_bytes();
  }
  free_bytes -= std::min(free_bytes, prompt_cache_bytes);
  return free_bytes / 10 * 8;
}

// A drafter used beside other requests: its calls take the model's lock, as
// a drafter may run a draft model on the same backend and thread pool as
// the target's passes.
class LockedDrafter final : public Drafter {
public:
  LockedDrafter(std::unique_ptr<Drafter> d, std::mutex& mu) : d_(std::move(d)), mu_(mu) {}
  std::string name() const override { return d_->name(); }
  std::vector<uint32_t> propose(std::span<const uint32_t> history, int k) override {
    std::lock_guard lock(mu_);
    return d_->propose(history, k);
  }
  void committed(const Rows& captured, size_t rows) override {
    std::lock_guard lock(mu_);
    d_->committed(captured, rows);
  }
  std::vector<int64_t> capture_layers() const override { return d_->capture_layers(); }

private:
  std::unique_ptr<Drafter> d_;
  std::mutex& mu_;
};

std::unique_ptr<Drafter> locked_drafter(std::unique_ptr<Drafter> d, std::mutex& mu) {
  return std::make_unique<LockedDrafter>(std::move(d), mu);
}

}  // namespace

// The heat histogram in memory is always current; heat.json (written with an
// fsync and a rename) is read only by the next start (pinning) and by setup
// (replication). Writing it after every request cost a busy server a disk
// flush per request, so it is written at the end of the request that makes
// kHeatSaveRequests since the last write, or of the first one after
// kHeatSaveInterval has passed: a crash loses the heat of fewer than
// kHeatSaveRequests requests. `deltafin serve` writes it once more at exit.
struct Engine::Impl {
  static constexpr int kHeatSaveRequests = 32;
  static constexpr std::chrono::seconds kHeatSaveInterval{60};

  std::unique_ptr<LoadedModel> owned;  // null when the caller keeps the model
  LoadedModel* m;
  EngineSettings o;
  const std::atomic<bool>* shutdown;
  uint64_t session_budget = 0;
  int64_t context_limit = 0;
  PromptCache cache;
  std::unique_ptr<PromptDiskCache> disk;
  DrafterFactory drafters;
  // Concurrent requests (EngineSettings::parallel > 1): model_mu serialises
  // every use of the model outside the scheduler's steps (which hold it
  // too); cache_mu guards the RAM prompt cache, disk_mu the disk one (its
  // writes are slow: they must not hold up RAM reuse); progress_mu the list
  // of running requests.
  std::mutex model_mu, cache_mu, disk_mu, heat_mu;
  std::unique_ptr<StepScheduler> scheduler;
  std::atomic<uint64_t> next_order{0};
  mutable std::mutex progress_mu;
  std::list<const LiveProgress*> running;  // oldest first
  mutable std::mutex totals_mu;
  Totals totals;
  std::atomic<int> step_delay_ms{0}, prefill_delay_ms{0};  // EngineTestHooks
  int heat_unsaved_requests = 0;
  Clock::time_point heat_saved_at = Clock::now();
  PrefillEstimate estimate;  // admission by time: observed after each prefill (engine/prefill_estimate.h)
  std::atomic<int> runs_active{0};         // generations running now, and started so far: a prefill
  std::atomic<uint64_t> runs_started{0};   // is measured only when it ran alone

  Impl(std::unique_ptr<LoadedModel> own, LoadedModel& model, EngineSettings settings, const std::atomic<bool>* stop)
      : owned(std::move(own)),
        m(&model),
        o(std::move(settings)),
        shutdown(stop),
        cache(m->causal(), o.prompt_cache_entries, o.prompt_cache_bytes),
        drafters(o.draft, *m),
        estimate(PrefillEstimate::prior_pair_ratio(m->summary())) {
    if (!o.prompt_cache_dir.empty() && o.prompt_cache_disk_bytes > 0)
      disk = std::make_unique<PromptDiskCache>(o.prompt_cache_dir, o.prompt_cache_disk_bytes, m->fingerprint,
                                               m->causal());
    session_budget = o.session_budget_bytes > 0 ? o.session_budget_bytes : derived_session_budget(*m, o.prompt_cache_bytes);
    const int64_t model_limit = m->summary().context;
    // The most positions the budget holds (session_bytes grows with both).
    int64_t lo = 0, hi = model_limit;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (session_bytes(mid, mid) <= session_budget) lo = mid;
      else hi = mid - 1;
    }
    const int64_t fits = lo;
    if (o.context_limit > 0 && std::min(o.context_limit, model_limit) > fits)
      fail("--context ", o.context_limit, " needs ", session_bytes(o.context_limit, o.context_limit),
           " bytes of session memory, but the session budget is ", session_budget, " bytes, which holds ", fits,
           " positions (", m->summary().session_bytes_per_position,
           " bytes each); lower --context or raise --session-budget-mb");
    context_limit = o.context_limit > 0 ? std::min(o.context_limit, model_limit) : fits;
    if (context_limit < 2)
      fail("the session budget of ", session_budget, " bytes holds ", fits,
           " positions, too few for a prompt and one token (--session-budget-mb, --cache-gb)");
    if (o.parallel < 1) fail("parallel requests: ", o.parallel, " (the least is 1)");
    if (o.parallel > 1)
      // Streamed: no pacing (a step's time is its experts' reads, not its
      // rows), larger steps, and a lone prompt's passes whole.
      scheduler = std::make_unique<StepScheduler>(
          m->causal(), model_mu,
          o.step_rows > 0 ? o.step_rows : m->stream ? StepScheduler::kDefaultStreamedStepRows : StepScheduler::kDefaultStepRows,
          /*pace=*/!m->stream, /*whole_alone=*/m->stream);
    if (o.calibrate_prefill) calibrate_prefill_estimate(estimate, m->causal(), *m->text, o.prefill_chunk, o.prefill_group);
  }

  uint64_t session_bytes(int64_t positions, int64_t prompt) const {
    const ModelSummary& c = m->summary();
    const int64_t group = std::min<int64_t>(prompt, prefill_group_rows(c, o.prefill_chunk, prompt));
    return c.session_fixed_bytes + c.session_bytes_per_position * static_cast<uint64_t>(std::max<int64_t>(positions, 0)) +
           c.pass_row_bytes * static_cast<uint64_t>(std::max<int64_t>(group, 0));
  }

  // The longest kept prefix, from RAM or, when longer, from disk; a fresh
  // session when none. One session in memory at a time: the RAM copy goes
  // before the disk state comes, and is taken again if that fails.
  std::unique_ptr<ModelSession> reuse(const std::vector<uint32_t>& prompt, const std::string& scope, Outcome& out) {
    auto ram_restore = [&] {
      std::lock_guard lock(cache_mu);
      return cache.restore(prompt, scope);
    };
    PromptCache::Restored ram = ram_restore();
    if (disk) {
      std::unique_lock lock(disk_mu);
      if (disk->available(prompt, ram.length, scope) > ram.length) {
        ram.session.reset();
        if (PromptDiskCache::Restored d = disk->restore(prompt, ram.length, scope); d.session) {
          out.cached_tokens = out.disk_tokens = d.length;
          return std::move(d.session);
        }
        lock.unlock();
        ram = ram_restore();
      }
    }
    if (ram.session) {
      out.cached_tokens = ram.length;
      return std::move(ram.session);
    }
    return m->causal().new_session();
  }

  Outcome run(const GenerateRequest& request, const std::function<bool(uint32_t)>& on_token,
              const std::function<bool()>& cancelled);
  RunStats run_stats(const RunStatsCollector& collector, const GenerateStats& st, const SpecStats& spec,
                     const std::string& drafter, const ModelSession& session) const;

  void note_disk_totals() {
    if (!disk) return;
    std::unique_lock disk_lock(disk_mu);
    const PromptDiskCache::Stats d = disk->stats();
    disk_lock.unlock();
    std::lock_guard lock(totals_mu);
    totals.disk_hits = d.hits, totals.disk_writes = d.writes, totals.disk_rejected = d.rejected;
    totals.disk_evicted = d.evicted, totals.disk_bytes = d.bytes;
  }

  void note_request_for_heat() {
    std::lock_guard heat_lock(heat_mu);
    const auto now = Clock::now();
    if (++heat_unsaved_requests < kHeatSaveRequests && now - heat_saved_at < kHeatSaveInterval) return;
    {
      std::lock_guard model_lock(model_mu);  // the passes update the heat
      m->save_heat();
    }
    heat_unsaved_requests = 0;
    heat_saved_at = now;
  }
};

// The figures of a finished generation, as data (the callers format them).
RunStats Engine::Impl::run_stats(const RunStatsCollector& collector, const GenerateStats& st, const SpecStats& spec,
                                 const std::string& drafter, const ModelSession& session) const {
  RunStats r;
  r.model = m->info();
  r.generate = st;
  r.session_bytes = session.bytes();
  r.session_length = session.length();
  r.session_fixed_bytes = m->summary().session_fixed_bytes;
  r.session_bytes_per_position = m->summary().session_bytes_per_position;
  r.drafter = drafter;
  r.spec = spec;
  r.steps = collector.steps();
  r.prefill = collector.prefill_totals();
  r.mirror = collector.mirror_totals();
  if (m->stream)
    if (const RouteLookaheadReport* look = m->route_lookahead()) r.lookahead_gates = look->describe_gates();
  r.peak_rss_bytes = peak_rss_bytes();
  return r;
}

Outcome Engine::Impl::run(const GenerateRequest& request, const std::function<bool(uint32_t)>& on_token,
                          const std::function<bool()>& cancelled) {
  const std::vector<uint32_t>& prompt = request.prompt;
  const bool chat = request.chat;
  const int64_t max_new = request.max_new;
  const auto t0 = Clock::now();
  // A prefill's time is the engine's work for its positions only when it ran
  // alone: nobody running at its start, nobody starting during it.
  const bool alone_at_start = runs_active.fetch_add(1) == 0;
  const uint64_t started = ++runs_started;
  struct Leave {
    std::atomic<int>& active;
    ~Leave() { active.fetch_sub(1); }
  } leave{runs_active};
  // Concurrent requests run on a scheduler client (passes stepped together);
  // one at a time, on the model itself.
  std::unique_ptr<StepScheduler::Client> client = scheduler ? scheduler->client(next_order++) : nullptr;
  CausalModel& model = client ? static_cast<CausalModel&>(*client) : m->causal();
  Outcome out;
  const int64_t n = static_cast<int64_t>(prompt.size());
  out.prompt_tokens = n;
  if (n == 0) fail("the prompt has no tokens");
  if (n >= context_limit)
    fail("the prompt has ", n, " tokens, leaving no room to generate within the context limit of ", context_limit,
         " positions (--context, or what --session-budget-mb holds: ", session_bytes(n + 1, n), " bytes of session for ",
         n + 1, " positions against a budget of ", session_budget, ")");
  // A drafter per request: its index and context are this request's.
  std::unique_ptr<Drafter> drafter = drafters.make(prompt, chat);
  if (client) {
    // The capture layers are the model's, shared by every request: set when
    // a drafter reads them, never cleared under another request that does.
    if (drafter && !drafter->capture_layers().empty()) model.set_capture_layers(drafter->capture_layers());
    if (drafter) drafter = locked_drafter(std::move(drafter), model_mu);
  } else {
    model.set_capture_layers(drafter ? drafter->capture_layers() : std::vector<int64_t>{});
  }
  out.drafter = drafter ? drafter->name() : "none";
  std::unique_ptr<ModelSession> session = reuse(prompt, request.cache_scope, out);
  session->plan_length(max_new >= context_limit - n ? context_limit : n + std::max<int64_t>(max_new, 0));
  const int64_t reused = out.cached_tokens;
  LiveProgress own_progress;
  LiveProgress& live = request.progress ? *request.progress : own_progress;
  live.prompt_tokens.store(n);
  live.prefill_done.store(reused);
  live.generated.store(0);
  live.phase.store(1);
  {
    std::lock_guard lock(progress_mu);
    running.push_back(&live);
  }
  struct Idle {
    Impl& e;
    LiveProgress& live;
    ~Idle() {
      live.phase.store(0);
      std::lock_guard lock(e.progress_mu);
      e.running.remove(&live);
    }
  } idle_at_end{*this, live};

  // Marks kept for reuse: the prompt minus its last token (a repeat of this
  // prompt restores there) and, on disk, the prompt's last whole block
  // (PromptDiskCache::save_point). The prefill pauses at both; a pause
  // changes no bit (a pass equals its parts).
  std::vector<std::shared_ptr<SessionMark>> boundaries;
  const int64_t save_at = disk ? PromptDiskCache::save_point(n) : 0;
  // The state on disk is kept however the request ends once it exists (a
  // later cancel does not make it wrong), and before the session moves into
  // the RAM cache below.
  struct KeepOnDisk {
    PromptDiskCache* disk;
    std::mutex& mu;
    const std::string& scope;
    const std::vector<uint32_t>& tokens;
    const std::unique_ptr<ModelSession>& session;
    std::shared_ptr<SessionMark> mark;
    void now() {
      if (disk && mark && session) {
        std::lock_guard lock(mu);
        disk->save(std::span(tokens).first(static_cast<size_t>(mark->length)), *mark, *session, scope);
      }
      mark.reset();
    }
    ~KeepOnDisk() { now(); }
  } keep_on_disk{disk.get(), disk_mu, request.cache_scope, prompt, session, nullptr};
  if (n > 1 && reused == n - 1) boundaries.push_back(model.mark(*session));

  GenerateParams p;
  p.max_new = max_new;
  p.context_limit = context_limit;
  p.eos = chat && m->chat() ? m->chat()->end_tokens() : m->eos;
  p.ignore_eos = request.stop.ignore_end_token;
  p.prefill_group = o.prefill_group;
  p.stop = shutdown;
  bool stopped_by_caller = false;
  p.cancelled = [&] { return stopped_by_caller || (cancelled && cancelled()); };
  p.prefill_chunk = o.prefill_chunk;
  p.on_prefill_progress = [&](int64_t done) {
    live.prefill_done.store(done);
    if (const int ms = prefill_delay_ms.load(); ms > 0 && !client) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  p.prompt_done = reused;
  // Without a RAM cache (`run`: one request) the n - 1 pause would only cost
  // the prefill one more pass.
  const bool keep_in_ram = o.prompt_cache_entries > 0;
  if (save_at > reused && (save_at < n - 1 || !keep_in_ram)) p.pause_at.push_back(save_at);
  if (keep_in_ram) p.pause_at.push_back(n - 1);  // when save_at is n - 1, this one pause serves both
  p.at_pause = [&](const ModelSession& s) {
    std::shared_ptr<SessionMark> mk = model.mark(s);
    if (mk->length == save_at) keep_on_disk.mark = mk;
    if (mk->length == n - 1) boundaries.push_back(mk);
  };

  std::optional<RunStatsCollector> collector;
  // Per-step figures read the model's own counters and routes: a request's
  // alone only when it runs alone.
  if (request.collect_stats && !client) p.observer = &collector.emplace(*m);

  std::vector<uint32_t> history = prompt;  // the prompt and every token chosen; the session holds a prefix
  SpecParams sp;
  sp.drafter = drafter.get();
  sp.fixed_k = o.draft_k;
  SpecStats spec;
  const GenerateStats st = generate_speculative(model, *session, prompt, p, sp, &spec, [&](uint32_t id) {
    history.push_back(id);
    if (live.phase.load() != 2) {  // the prefill is done: the request counts from here on
      live.phase.store(2);
      live.prefill_done.store(n);
      out.prefill_seconds = since(t0);
      if (alone_at_start && runs_started.load() == started && prefill_delay_ms.load() == 0)  // a test's delay measures nothing
        estimate.observe(n - reused, reused, out.prefill_seconds);
      std::lock_guard lock(totals_mu);
      totals.requests++;
      totals.prefill_positions += n - reused;
      totals.reused_positions += reused;
    }
    if (p.ends_turn(id)) {  // the end token is not reported
      out.end_token = id;
      return;
    }
    ++out.completion_tokens;
    live.generated.store(out.completion_tokens);
    if (const int ms = step_delay_ms.load(); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    if (!on_token(id)) stopped_by_caller = true;
  }, request.on_logits);
  switch (st.reason) {
    case StopReason::Eos: out.finish = Finish::Eos; break;
    case StopReason::MaxNew:
    case StopReason::ContextFull: out.finish = Finish::Length; break;
    case StopReason::Interrupted: out.finish = Finish::Cancelled; break;
  }
  if (stopped_by_caller) out.finish = Finish::Stopped;  // the caller's stop wins, as it came first
  if (collector) out.stats = run_stats(*collector, st, spec, out.drafter, *session);
  if (st.new_tokens == 0) {  // cancelled in the prefill: nothing kept in RAM, the disk state (if reached) kept
    keep_on_disk.now();
    note_disk_totals();
    return out.finish = Finish::Cancelled, out;
  }
  {
    std::lock_guard lock(totals_mu);
    totals.generated_tokens += out.completion_tokens;
    totals.spec_rounds += spec.rounds;
    totals.spec_drafted += spec.drafted;
    totals.spec_accepted += spec.accepted;
  }
  // Keep the state for reuse: on disk (before the session moves), and in RAM
  // with a mark at the end beside the prompt's.
  keep_on_disk.now();
  const int64_t length = session->length();
  if (length > n) boundaries.push_back(model.mark(*session));
  {
    std::lock_guard cache_lock(cache_mu);
    if (!boundaries.empty()) {
      std::vector<uint32_t> consumed(history.begin(), history.begin() + length);
      cache.put(std::move(consumed), std::move(session), std::move(boundaries), request.cache_scope);
    }
    std::lock_guard lock(totals_mu);
    totals.cache_entries = cache.entries();
    totals.cache_bytes = cache.bytes();
  }
  note_disk_totals();
  if (m->stream) note_request_for_heat();
  out.seconds = since(t0);
  return out;
}

Engine::Engine(std::unique_ptr<LoadedModel> model, EngineSettings settings, const std::atomic<bool>* shutdown) {
  if (!model) fail("engine: no model");
  LoadedModel& m = *model;
  impl_ = std::make_unique<Impl>(std::move(model), m, std::move(settings), shutdown);
}
Engine::Engine(const ModelSource& source, EngineSettings settings, const std::atomic<bool>* shutdown)
    : Engine(load_model(source), std::move(settings), shutdown) {}
Engine::Engine(LoadedModel& model, EngineSettings settings, const std::atomic<bool>* shutdown)
    : impl_(std::make_unique<Impl>(nullptr, model, std::move(settings), shutdown)) {}
Engine::~Engine() = default;

uint32_t Engine::vocab() const { return static_cast<uint32_t>(impl_->m->summary().vocab); }
const TokenText& Engine::text() const { return *impl_->m->text; }
const ChatFormat* Engine::chat() const { return impl_->m->chat(); }
std::string Engine::chat_missing() const { return impl_->m->chat_missing(); }
int64_t Engine::context_limit() const { return impl_->context_limit; }
int64_t Engine::model_context() const { return impl_->m->summary().context; }
uint64_t Engine::session_budget_bytes() const { return impl_->session_budget; }
uint64_t Engine::session_bytes_per_position() const { return impl_->m->summary().session_bytes_per_position; }
uint64_t Engine::session_bytes(int64_t positions, int64_t prompt) const { return impl_->session_bytes(positions, prompt); }
int64_t Engine::max_tokens_ceiling() const { return impl_->o.max_tokens_ceiling; }
std::string Engine::drafter() const { return impl_->drafters.describe(); }
bool Engine::shutting_down() const { return impl_->shutdown && impl_->shutdown->load(); }
void Engine::save_heat() { impl_->m->save_heat(); }
ModelInfo Engine::model_info() const { return impl_->m->info(); }
bool Engine::weight_exact() const { return impl_->m->spine_format != "int8-row"; }
double Engine::load_seconds() const { return impl_->m->load_seconds; }

// The session's share of the memory plan: what one request may hold, and so
// the longest context this engine takes (a longer prompt is refused).
SessionInfo Engine::session_info() const {
  const ModelSummary& c = impl_->m->summary();
  SessionInfo s;
  s.budget_bytes = impl_->session_budget;
  s.bytes_per_position = c.session_bytes_per_position;
  s.fixed_bytes = c.session_fixed_bytes;
  s.context_limit = impl_->context_limit;
  s.limit_by = impl_->o.context_limit > 0         ? SessionInfo::LimitBy::Option
               : impl_->context_limit < c.context ? SessionInfo::LimitBy::Budget
                                                  : SessionInfo::LimitBy::Model;
  return s;
}

std::vector<float> Engine::logits(const std::vector<uint32_t>& tokens, size_t step) {
  CausalModel& model = impl_->m->causal();
  model.set_capture_layers({});
  std::unique_ptr<ModelSession> session = model.new_session();
  const size_t V = static_cast<size_t>(model.summary().vocab);
  if (step == 0) step = tokens.size();
  std::vector<float> out(tokens.size() * V);
  for (size_t at = 0; at < tokens.size(); at += step) {
    const size_t n = std::min(step, tokens.size() - at);
    const Rows part = model.forward(*session, std::span<const uint32_t>(tokens).subspan(at, n), true);
    std::copy(part.v.begin(), part.v.end(), out.begin() + static_cast<std::ptrdiff_t>(at * V));
  }
  return out;
}

Outcome Engine::generate(const GenerateRequest& request, const std::function<bool(uint32_t)>& on_token,
                         const std::function<bool()>& cancelled) {
  return impl_->run(request, on_token, cancelled);
}

void Engine::set_test_hooks(const EngineTestHooks& hooks) {
  impl_->step_delay_ms.store(hooks.step_delay_ms);
  impl_->prefill_delay_ms.store(hooks.prefill_delay_ms);
  if (impl_->scheduler) impl_->scheduler->set_prefill_step_delay_ms(hooks.prefill_delay_ms);
  if (hooks.prefill_seconds_per_position > 0 || hooks.prefill_seconds_per_pair > 0)
    impl_->estimate.fix(hooks.prefill_seconds_per_position, hooks.prefill_seconds_per_pair);
}

double Engine::estimate_prefill_seconds(int64_t positions, int64_t before) const {
  return impl_->estimate.seconds(positions, before);
}
PrefillEstimate::Report Engine::prefill_estimate_report() const { return impl_->estimate.describe(); }

// What reuse() would restore now, by the same rule (the disk when longer).
// The disk is asked without disk_mu: available() reads file names only,
// through members no write changes, and a slow write must not hold up a
// request's admission.
int64_t Engine::reusable_prefix(const std::vector<uint32_t>& prompt, const std::string& scope) const {
  int64_t ram = 0;
  {
    std::lock_guard lock(impl_->cache_mu);
    ram = impl_->cache.reusable(prompt, scope);
  }
  const int64_t disk = impl_->disk ? impl_->disk->available(prompt, ram, scope) : 0;
  return std::max(ram, disk);
}

Engine::Progress Engine::Progress::of(const LiveProgress& live) {
  Progress p;
  const int ph = live.phase.load();
  p.phase = ph == 1 ? "prefill" : ph == 2 ? "decode" : "idle";
  p.prompt_tokens = live.prompt_tokens.load();
  p.prefill_done = live.prefill_done.load();
  p.generated = live.generated.load();
  return p;
}

Engine::Progress Engine::progress() const {
  std::lock_guard lock(impl_->progress_mu);
  return impl_->running.empty() ? Progress{} : Progress::of(*impl_->running.front());
}

std::vector<Engine::Progress> Engine::running() const {
  std::lock_guard lock(impl_->progress_mu);
  std::vector<Progress> all;
  for (const LiveProgress* p : impl_->running) all.push_back(Progress::of(*p));
  return all;
}

int Engine::parallel() const { return impl_->o.parallel; }

Engine::StepTotals Engine::step_totals() const {
  StepTotals t;
  if (!impl_->scheduler) return t;
  const StepScheduler::Stats s = impl_->scheduler->stats();
  t.steps = s.steps, t.rows = s.rows, t.parts = s.parts, t.prefill_rows = s.prefill_rows;
  t.decode_rows = s.decode_rows, t.max_parts = s.max_parts;
  return t;
}

Engine::Totals Engine::totals() const {
  std::lock_guard lock(impl_->totals_mu);
  return impl_->totals;
}

}  // namespace deltafin
