#include "server/generation_service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "spec/drafter_factory.h"
#include "spec/speculative_generate.h"
#include "spec/speculative_stepper.h"
#include "tokenizer/chat_encode.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace deltafin {

using api::ApiError;
using clock_type = std::chrono::steady_clock;

namespace {

// 80 % of the RAM nobody else has claimed: store runs take the memory plan's
// figures (measured before the expert cache filled), resident runs what is
// available now that every weight is loaded. The prompt cache's budget is
// set aside as well: its kept states live beside the running one.
uint64_t derived_session_budget(const LoadedK3& m, uint64_t prompt_cache_bytes) {
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

}  // namespace

GenerationService::GenerationService(LoadedK3& model, ServiceOptions options, const std::atomic<bool>* shutdown)
    : m_(model),
      o_(options),
      shutdown_(shutdown),
      cache_(options.prompt_cache_entries, options.prompt_cache_bytes),
      drafters_(options.draft, model, options.dspark_dir, options.draft_model_dir) {
  if (!o_.prompt_cache_dir.empty() && o_.prompt_cache_disk_bytes > 0)
    disk_ = std::make_unique<PromptDiskCache>(o_.prompt_cache_dir, o_.prompt_cache_disk_bytes, m_.fingerprint, m_.config);
  session_budget_ = o_.session_budget_bytes > 0 ? o_.session_budget_bytes
                                                 : derived_session_budget(m_, o_.prompt_cache_bytes);
  const int64_t model_limit = m_.config.max_position_embeddings;
  // The most positions the budget holds (session_bytes grows with both).
  int64_t lo = 0, hi = model_limit;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (session_bytes(mid, mid) <= session_budget_) lo = mid;
    else hi = mid - 1;
  }
  const int64_t fits = lo;
  if (o_.context_limit > 0 && std::min(o_.context_limit, model_limit) > fits)
    fail("serve: --context ", o_.context_limit, " needs ", session_bytes(o_.context_limit, o_.context_limit),
         " bytes of session memory, but the session budget is ", session_budget_, " bytes, which holds ", fits,
         " positions (", K3Session::bytes_per_position(m_.config), " bytes each); lower --context or raise --session-budget-mb");
  context_limit_ = o_.context_limit > 0 ? std::min(o_.context_limit, model_limit) : fits;
  if (context_limit_ < 2)
    fail("serve: the session budget of ", session_budget_, " bytes holds ", fits,
         " positions, too few for a prompt and one token (--session-budget-mb, --cache-gb)");
}

uint64_t GenerationService::session_bytes(int64_t positions, int64_t prompt) const {
  const ModelSummary& c = m_.model->summary();
  const int64_t group = std::min<int64_t>(prompt, prefill_group_rows(c, o_.prefill_chunk, prompt));
  return c.session_fixed_bytes + c.session_bytes_per_position * static_cast<uint64_t>(std::max<int64_t>(positions, 0)) +
         c.pass_row_bytes * static_cast<uint64_t>(std::max<int64_t>(group, 0));
}

GenerationService::Progress GenerationService::progress() const {
  Progress p;
  const int phase = phase_.load();
  p.phase = phase == 1 ? "prefill" : phase == 2 ? "decode" : "idle";
  p.prompt_tokens = prompt_tokens_.load();
  p.prefill_done = prefill_done_.load();
  p.generated = generated_.load();
  return p;
}

PreparedPrompt GenerationService::prepare(const api::GenerationRequest& r) const {
  PreparedPrompt p;
  p.chat = r.endpoint == api::Endpoint::Chat;
  if (p.chat) {
    ChatOptions o;
    o.thinking = true;  // K3 answers with a think block; reasoning_effort sets its length
    o.reasoning_effort = r.reasoning_effort;
    try {
      p.tokens = encode_chat_segments(*m_.tokenizer, render_chat(r.messages, o));
    } catch (const Error& e) {
      throw ApiError(400, std::string("messages: ") + e.what(), "messages", "invalid_messages");
    }
    p.thinking = o.thinking;
  } else if (r.prompt_text) {
    try {
      p.tokens = m_.tokenizer->encode_ordinary(*r.prompt_text);  // raw mode: no BOS (§7.8)
    } catch (const Error& e) {
      throw ApiError(400, std::string("prompt: ") + e.what(), "prompt", "invalid_prompt");
    }
  } else {
    p.tokens = r.prompt_ids;
  }
  const int64_t n = static_cast<int64_t>(p.tokens.size());
  if (n == 0) throw ApiError(400, "The prompt encodes to no tokens", p.chat ? "messages" : "prompt", "empty_prompt");
  const int64_t limit = context_limit();
  if (n >= limit)
    throw ApiError(400,
                   cat("This server's maximum context length is ", limit, " tokens; the prompt has ", n,
                       " tokens, leaving no room to generate. Its session would need ", session_bytes(n + 1, n),
                       " bytes of memory; the session budget is ", session_budget_, " bytes (",
                       K3Session::bytes_per_position(m_.config), " per position; the model's own limit is ",
                       m_.config.max_position_embeddings, " tokens)"),
                   p.chat ? "messages" : "prompt", "context_length_exceeded");
  p.max_new = std::min(r.max_tokens.value_or(o_.max_tokens_ceiling), limit - n);
  return p;
}

Outcome GenerationService::run(const PreparedPrompt& p, const std::function<bool(uint32_t)>& on_token,
                               const std::function<bool()>& cancelled) {
  const auto t0 = clock_type::now();
  auto stop_now = [&] { return (shutdown_ && shutdown_->load()) || (cancelled && cancelled()); };
  Outcome out;
  out.prompt_tokens = static_cast<int64_t>(p.tokens.size());
  K3Model& model = *m_.model;
  K3Session session(m_.config);
  // A drafter per request: its index and context are this request's.
  std::unique_ptr<Drafter> drafter = drafters_.make(p.tokens, p.chat);
  model.set_capture_layers(drafter ? drafter->capture_layers() : std::vector<int64_t>{});
  SpecStats spec;
  SpeculativeStepper stepper(model, drafter.get(), DraftController::kMaxDraft, o_.draft_k, &spec);
  stepper.set_draft_stop(m_.tokenizer->eos_id());
  out.drafter = drafter ? drafter->name() : "none";
  const int64_t n = out.prompt_tokens;
  // Reuse: the longest kept prefix, from RAM or, when longer, from disk.
  int64_t reused = cache_.restore(p.tokens, session);
  if (disk_ && disk_->available(p.tokens, reused) > reused) {
    // One session in memory at a time: the RAM state goes, the disk state
    // comes; if that fails the RAM state is taken again.
    session.reset();
    if (const int64_t l = disk_->restore(p.tokens, reused, session); l > reused) {
      reused = out.disk_tokens = l;
    } else {
      session.reset();
      reused = cache_.restore(p.tokens, session);
    }
  }
  out.cached_tokens = reused;
  prompt_tokens_.store(n);
  prefill_done_.store(reused);
  generated_.store(0);
  phase_.store(1);
  struct Idle {
    std::atomic<int>& phase;
    ~Idle() { phase.store(0); }
  } idle_at_end{phase_};

  // Prefill layer-major (slices of prefill_chunk rows) up to n-1, snapshot
  // there (the point a repeat of this prompt restores to), then the last
  // token. With a disk cache the prefill stops once at the last whole block
  // (PromptDiskCache::save_point) to snapshot the state kept on disk; the
  // cut changes no bit (a pass equals its parts). A cancel is noticed
  // within ~20 ms of model time; prefill() rolls an unfinished pass back.
  std::vector<K3Session::Snapshot> boundaries;
  const std::span<const uint32_t> all(p.tokens);
  auto tell_drafter = [&](size_t rows) {
    if (drafter) drafter->committed(model.captured(), rows);
  };
  auto prefill_range = [&](int64_t from, int64_t to) {
    if (to <= from) return true;
    if (stop_now()) return false;
    return prefill(model, session, all.subspan(static_cast<size_t>(from), static_cast<size_t>(to - from)),
                   o_.prefill_chunk, nullptr, stop_now, tell_drafter, 0,
                   [&](int64_t done) { prefill_done_.store(from + done); })
               .T != 0;
  };
  // The state at the prompt's last whole block is kept on disk however the
  // request ends once it exists (a later cancel does not make it wrong), and
  // before the session moves into the RAM cache below.
  struct KeepOnDisk {
    PromptDiskCache* disk;
    std::span<const uint32_t> tokens;
    const K3Session& session;
    std::optional<K3Session::Snapshot> snap;
    void now() {
      if (disk && snap) disk->save(tokens.first(static_cast<size_t>(snap->length)), *snap, session);
      snap.reset();
    }
    ~KeepOnDisk() { now(); }
  } keep_on_disk{disk_.get(), all, session, std::nullopt};
  const int64_t save_at = disk_ ? PromptDiskCache::save_point(n) : 0;
  if (save_at > reused) {
    if (!prefill_range(reused, save_at)) return out.finish = Finish::Cancelled, out;
    keep_on_disk.snap = session.snapshot();
  }
  if (!prefill_range(std::max(reused, save_at), n - 1)) return out.finish = Finish::Cancelled, out;
  if (n > 1) boundaries.push_back(session.snapshot());
  if (stop_now()) return out.finish = Finish::Cancelled, out;
  Rows logits = model.forward(session, all.last(1), false);
  tell_drafter(1);
  prefill_done_.store(n);
  phase_.store(2);
  out.prefill_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  {
    std::lock_guard lock(totals_mu_);
    totals_.requests++;
    totals_.prefill_positions += n - reused;
    totals_.reused_positions += reused;
  }

  // Decode: each token the target chooses is either reported or ends the
  // turn. A step may choose several (speculation, spec/speculative_stepper.h);
  // they are handled one by one exactly as single steps would be, and the
  // session keeps only the rows of those handled.
  std::vector<uint32_t> history = p.tokens;  // prompt and every token handled; the session holds a prefix
  const uint32_t eos = m_.tokenizer->eos_id();
  const int64_t limit = context_limit();
  std::vector<uint32_t> chosen{argmax_first(logits.row(0), logits.n)};
  bool from_step = false;  // the first choice comes from the prefill, later ones from stepper steps
  for (;;) {
    const int64_t base = session.length();
    size_t handled = 0;
    bool done = false;
    for (uint32_t next : chosen) {
      ++handled;
      history.push_back(next);
      if (next == eos) {
        out.finish = Finish::Eos;
        done = true;
        break;
      }
      ++out.completion_tokens;
      generated_.store(out.completion_tokens);
      if (o_.step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.step_delay_ms));
      if (!on_token(next)) {
        out.finish = Finish::Stopped;
        done = true;
        break;
      }
      // The session length plain decoding would have here.
      const int64_t length = base + (from_step ? static_cast<int64_t>(handled) : 0);
      if (out.completion_tokens >= p.max_new || length >= limit) {
        out.finish = Finish::Length;
        done = true;
        break;
      }
      if (stop_now()) {
        out.finish = Finish::Cancelled;
        done = true;
        break;
      }
    }
    if (from_step) stepper.commit(session, handled);
    if (done) break;
    const int64_t budget = std::min(p.max_new - out.completion_tokens - 1, limit - session.length() - 1);
    chosen = stepper.step(session, history, budget);
    from_step = true;
  }
  std::vector<uint32_t> consumed(history.begin(), history.begin() + session.length());
  {
    std::lock_guard lock(totals_mu_);
    totals_.generated_tokens += out.completion_tokens;
    totals_.spec_rounds += spec.rounds;
    totals_.spec_drafted += spec.drafted;
    totals_.spec_accepted += spec.accepted;
  }
  // Keep the state for reuse: on disk (before the session moves), and in RAM
  // with a snapshot at the end beside the prompt's.
  keep_on_disk.now();
  if (session.length() > n) boundaries.push_back(session.snapshot());
  if (!boundaries.empty()) {
    cache_.put(std::move(consumed), std::move(session), std::move(boundaries));
    std::lock_guard lock(totals_mu_);
    totals_.cache_entries = cache_.entries();
    totals_.cache_bytes = cache_.bytes();
  }
  if (disk_) {
    std::lock_guard lock(totals_mu_);
    totals_.disk = disk_->stats();
  }
  if (m_.stream) note_request_for_heat();
  out.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  return out;
}

void GenerationService::note_request_for_heat() {
  const auto now = clock_type::now();
  if (++heat_unsaved_requests_ < kHeatSaveRequests && now - heat_saved_at_ < kHeatSaveInterval) return;
  m_.save_heat();
  heat_unsaved_requests_ = 0;
  heat_saved_at_ = now;
}

GenerationService::Totals GenerationService::totals() const {
  std::lock_guard lock(totals_mu_);
  return totals_;
}

}  // namespace deltafin
