#include "engine/step_scheduler.h"

#include <algorithm>
#include <atomic>

#include "util/error.h"

namespace deltafin {

namespace {

// A pass of at most this many rows is a decode pass (a token, a short
// verification, a prompt's last row after reuse): it joins a step whole.
constexpr size_t kDecodeRows = 16;

// A prefill row's share of a step is weighed by its attention work: a row
// at context c costs 1 + c / kContextRows rows' worth of the step's budget,
// so the slice of a prompt 600k positions in shrinks to a few rows and the
// decode rows beside it keep steps about as short as at the prompt's start.
// (Chosen, not fitted: at this context a row's attention reads about as
// many cache bytes as the small bench model's other products of a row.)
constexpr uint64_t kContextRows = 2048;

// Steps between two measurements of a decode step alone (pacing).
constexpr int64_t kRemeasureSteps = 64;

// How often a waiting request asks its own `cancelled` and reports progress.
constexpr std::chrono::milliseconds kClientPoll{20};

}  // namespace

// One forward() or forward_verify() call of a request, run in one or more
// steps. Fields below `mu_` are the scheduler's; `cancel` and `progress`
// cross between the request's thread and the scheduler's.
struct StepScheduler::Work {
  Client* client = nullptr;
  ModelSession* session = nullptr;
  std::span<const uint32_t> tokens;
  bool all_logits = false, verify = false;
  size_t slice_rows = 0;  // the caller's PassShape::slice_rows
  std::atomic<bool> cancel{false};
  std::atomic<size_t> progress{0};
  // The scheduler's, under mu_ (or while the work is in a running step).
  size_t done = 0;
  Rows logits, captured;
  bool finished = false, cancelled = false;
  std::exception_ptr error;

  size_t left() const { return tokens.size() - done; }
  bool decode() const { return verify || tokens.size() <= kDecodeRows; }
};

StepScheduler::StepScheduler(CausalModel& model, std::mutex& model_mu, int64_t step_rows, bool pace, bool whole_alone)
    : model_(model), model_mu_(model_mu), step_rows_(step_rows > 0 ? step_rows : kDefaultStepRows), pace_(pace),
      whole_alone_(whole_alone) {
  thread_ = std::thread([this] { loop(); });
}

StepScheduler::~StepScheduler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

std::unique_ptr<StepScheduler::Client> StepScheduler::client(uint64_t order) {
  return std::make_unique<Client>(*this, order);
}

size_t prefill_budget_beside_decode(double decode_step_s, double prefill_unit_s, size_t budget, size_t prompts,
                                    size_t decoders) {
  if (decode_step_s <= 0 || prefill_unit_s <= 0) return budget;  // not measured yet
  const double share = decoders > 0 && prompts > decoders ? static_cast<double>(prompts) / static_cast<double>(decoders) : 1.0;
  const double units = share * decode_step_s / prefill_unit_s;
  return std::clamp<size_t>(units >= static_cast<double>(budget) ? budget : static_cast<size_t>(units), 1, std::max<size_t>(budget, 1));
}

// Decode-only steps give the decode step's time; steps with prefill units
// give a unit's time beyond it. Moving averages: the rates drift with the
// context and the cache.
void StepScheduler::learn_pace(double seconds, bool decoding, size_t prefill_units) {
  constexpr double kKeep = 0.8;
  ++steps_since_decode_alone_;
  if (prefill_units == 0) {
    if (decoding) {
      decode_step_s_ = decode_step_s_ > 0 ? kKeep * decode_step_s_ + (1 - kKeep) * seconds : seconds;
      steps_since_decode_alone_ = 0;
    }
    return;
  }
  const double base = decoding ? decode_step_s_ : 0;
  const double unit = std::max(seconds - base, 0.0) / static_cast<double>(prefill_units);
  prefill_unit_s_ = prefill_unit_s_ > 0 ? kKeep * prefill_unit_s_ + (1 - kKeep) * unit : unit;
}

StepScheduler::Stats StepScheduler::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t StepScheduler::waiting() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

void StepScheduler::set_prefill_step_delay_ms(int ms) { prefill_step_delay_ms_.store(ms); }

// Hands `w` in and waits for it, asking the request's own `cancelled` and
// telling its progress from this (the request's) thread, so the scheduler
// never runs a client's callbacks (a slow socket would stall every request).
Rows StepScheduler::submit(Work& w, const PassShape& shape) {
  {
    std::lock_guard lock(mu_);
    pending_.push_back(&w);
  }
  work_cv_.notify_all();
  const auto layers = static_cast<size_t>(std::max<int64_t>(model_.summary().layers, 1));
  size_t told = 0;
  std::unique_lock lock(mu_);
  while (!w.finished) {
    done_cv_.wait_for(lock, kClientPoll);
    if (w.finished) break;
    lock.unlock();
    if (shape.cancelled && shape.cancelled()) w.cancel.store(true);
    const size_t p = w.progress.load();
    if (p != told) {
      told = p;
      if (shape.on_rows) shape.on_rows(p);
      else if (shape.on_layer) shape.on_layer(static_cast<int64_t>(layers * p / w.tokens.size()));
    }
    lock.lock();
  }
  if (w.error) std::rethrow_exception(w.error);
  if (w.cancelled) return Rows();
  return std::move(w.logits);
}

bool StepScheduler::gather(std::unique_lock<std::mutex>& lock) {
  work_cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
  if (pending_.empty()) return false;  // stopping, nothing left
  // Let the last step's requests hand in their next rows, so that decoding
  // requests stay in one batch; a slow one joins a later step.
  work_cv_.wait_for(lock, kGatherWait, [&] { return stop_ || pending_.size() >= last_step_parts_; });
  return true;
}

namespace {

// Units of the prefill budget each prompt gets this step (`left` in age
// order, oldest first). The oldest is guaranteed a quarter of the budget, so
// a long prompt always advances however many short ones arrive; the rest goes
// to the prompts with the least left first (shortest remaining first: a chat
// behind a huge prompt has its first token after a step or two, and of
// several equal prompts one finishes before the next begins, rather than all
// finishing together late); what they leave goes back to the oldest.
std::vector<size_t> share_prefill_rows(const std::vector<size_t>& left, size_t budget) {
  std::vector<size_t> give(left.size(), 0);
  if (left.empty()) return give;
  give[0] = std::min(left[0], std::max<size_t>(budget / 4, 1));
  size_t rest = budget > give[0] ? budget - give[0] : 0;
  std::vector<size_t> order;
  for (size_t i = 1; i < left.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return left[a] < left[b]; });
  for (size_t i : order) {
    const size_t g = std::min(left[i], rest);
    give[i] += g, rest -= g;
  }
  give[0] += std::min(left[0] - give[0], rest);
  return give;
}
}  // namespace

void StepScheduler::loop() {
  std::unique_lock lock(mu_);
  while (gather(lock)) {
    // Cancelled requests leave first (between steps: nothing of theirs runs).
    for (auto it = pending_.begin(); it != pending_.end();) {
      Work* w = *it;
      if (!w->cancel.load()) {
        ++it;
        continue;
      }
      w->cancelled = w->finished = true;
      it = pending_.erase(it);
    }
    done_cv_.notify_all();
    std::vector<Work*> step, prefills;
    std::vector<size_t> rows;
    size_t decode_rows = 0;
    for (Work* w : pending_) {
      if (!w->decode()) {
        prefills.push_back(w);
        continue;
      }
      step.push_back(w);
      rows.push_back(w->left());
      decode_rows += w->left();
    }
    std::stable_sort(prefills.begin(), prefills.end(),
                     [](const Work* a, const Work* b) { return a->client->order_ < b->client->order_; });
    // Shared in cost units (kContextRows), handed out in rows.
    std::vector<size_t> left, cost;
    size_t units = 0;
    for (const Work* w : prefills) {
      const auto context = static_cast<uint64_t>(w->session->length());
      cost.push_back(static_cast<size_t>(1 + context / kContextRows));
      left.push_back(w->left() * cost.back());
    }
    size_t budget = static_cast<size_t>(step_rows_) > decode_rows ? static_cast<size_t>(step_rows_) - decode_rows : 0;
    // The decode step's time is measured on a step of decode rows alone:
    // the first time requests decode beside a prefill, and every
    // kRemeasureSteps after (it grows with the decoders' contexts).
    const bool decode_alone = pace_ && decode_rows > 0 && !prefills.empty() &&
                              (steps_since_decode_alone_ >= kRemeasureSteps || decode_step_s_ <= 0);
    if (pace_ && decode_rows > 0)
      budget = prefill_budget_beside_decode(decode_step_s_, prefill_unit_s_, budget, prefills.size(), step.size());
    const std::vector<size_t> give = share_prefill_rows(left, budget);
    for (size_t i = 0; i < prefills.size() && !decode_alone; ++i) {
      if (give[i] == 0) continue;  // waits for a later step
      step.push_back(prefills[i]);
      rows.push_back(std::clamp<size_t>(give[i] / cost[i], 1, prefills[i]->left()));
      // Streamed experts: a lone prompt's pass runs whole (a slice re-reads its rows' experts).
      if (whole_alone_ && decode_rows == 0 && prefills.size() == 1) rows.back() = prefills[i]->left();
      units += rows.back() * cost[i];
    }
    pending_.clear();
    for (Work* w : prefills)  // a prefill left out of a decode-only step waits for the next
      if (std::find(step.begin(), step.end(), w) == step.end()) pending_.push_back(w);
    if (step.empty()) continue;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    run_step(step, rows);
    learn_pace(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), decode_rows > 0, units);
    lock.lock();
    last_step_parts_ = 0;
    for (Work* w : step) {
      w->finished = w->error || w->done == w->tokens.size();
      if (w->finished) ++last_step_parts_;  // its request will likely hand in its next rows
      else pending_.push_back(w);           // a prefill with slices still to run
    }
    last_step_parts_ += pending_.size();
    done_cv_.notify_all();
  }
}

// Runs one step: verifications as their own passes, then every other part
// as one batched pass. An error fails every request of the step (the pass
// they shared did not complete).
void StepScheduler::run_step(std::vector<Work*>& step, std::vector<size_t>& rows) {
  std::lock_guard model_lock(model_mu_);
  std::vector<BatchPart> parts;
  std::vector<Work*> batched;
  size_t slice = 0, total = 0, prefill_rows = 0, decode_rows = 0;
  try {
    for (size_t i = 0; i < step.size(); ++i) {
      Work* w = step[i];
      (w->decode() ? decode_rows : prefill_rows) += rows[i];
      if (w->verify) {
        w->logits = model_.forward_verify(*w->session, w->tokens);
        w->captured = model_.captured();
        w->done = w->tokens.size();
        continue;
      }
      BatchPart p;
      p.session = w->session;
      p.tokens = w->tokens.subspan(w->done, rows[i]);
      p.all_logits = w->all_logits;
      parts.push_back(p);
      batched.push_back(w);
      total += rows[i];
      if (w->slice_rows > 0) slice = slice == 0 ? w->slice_rows : std::min(slice, w->slice_rows);
    }
    if (!parts.empty()) {
      PassShape shape;
      shape.slice_rows = slice;
      std::vector<Rows> out = model_.forward_batch(parts, shape);
      if (out.size() != parts.size()) fail("step scheduler: a batched pass of ", parts.size(), " parts returned ", out.size());
      const Rows& cap = model_.captured();
      size_t row0 = 0;
      for (size_t i = 0; i < batched.size(); ++i) {
        Work* w = batched[i];
        const size_t n = parts[i].tokens.size();
        if (cap.T == total) {  // this part's captured rows, appended to the call's
          w->captured.T += n, w->captured.n = cap.n;
          w->captured.v.insert(w->captured.v.end(), cap.row(row0), cap.row(row0) + n * cap.n);
        }
        row0 += n;
        if (w->all_logits) {
          w->logits.T += out[i].T, w->logits.n = out[i].n;
          w->logits.v.insert(w->logits.v.end(), out[i].v.begin(), out[i].v.end());
        } else {
          w->logits = std::move(out[i]);
        }
        w->done += n;
      }
    }
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    for (Work* w : step) w->error = e;
    return;
  }
  for (Work* w : step) w->progress.store(w->done);
  {
    std::lock_guard lock(mu_);
    stats_.steps++;
    stats_.rows += static_cast<int64_t>(prefill_rows + decode_rows);
    stats_.parts += static_cast<int64_t>(step.size());
    stats_.max_parts = std::max<int64_t>(stats_.max_parts, static_cast<int64_t>(step.size()));
    stats_.prefill_rows += static_cast<int64_t>(prefill_rows);
    stats_.decode_rows += static_cast<int64_t>(decode_rows);
  }
  if (const int ms = prefill_step_delay_ms_.load(); ms > 0 && prefill_rows > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

Rows StepScheduler::Client::forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
                                    const PassShape& shape) {
  if (tokens.empty()) fail("forward: no tokens");
  Work w;
  w.client = this;
  w.session = &session;
  w.tokens = tokens;
  w.all_logits = all_logits;
  w.slice_rows = shape.slice_rows;
  Rows out = s_.submit(w, shape);
  captured_ = std::move(w.captured);
  return out;
}

Rows StepScheduler::Client::forward_verify(ModelSession& session, std::span<const uint32_t> tokens) {
  if (tokens.empty()) fail("forward_verify: no tokens");
  Work w;
  w.client = this;
  w.session = &session;
  w.tokens = tokens;
  w.all_logits = w.verify = true;
  Rows out = s_.submit(w, PassShape{});
  captured_ = std::move(w.captured);
  return out;
}

void StepScheduler::Client::keep_verified(ModelSession& session, size_t rows) {
  std::lock_guard lock(s_.model_mu_);
  s_.model_.keep_verified(session, rows);
}

void StepScheduler::Client::set_capture_layers(std::vector<int64_t> layers) {
  std::lock_guard lock(s_.model_mu_);
  s_.model_.set_capture_layers(std::move(layers));
}

}  // namespace deltafin
