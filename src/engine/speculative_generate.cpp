#include "engine/speculative_generate.h"

#include <algorithm>
#include <chrono>

#include "engine/prefill.h"
#include "model/common/greedy.h"
#include "engine/speculative_stepper.h"
#include "util/error.h"

namespace deltafin {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

GenerateStats generate_speculative(CausalModel& model, ModelSession& session, const std::vector<uint32_t>& prompt,
                                   const GenerateParams& p, const SpecParams& spec, SpecStats* stats_out,
                                   const std::function<void(uint32_t)>& on_token,
                                   const std::function<void(const float*, size_t)>& on_logits) {
  // The prompt checks and stop rules of engine/generate.h.
  if (p.prompt_done < 0 || p.prompt_done >= static_cast<int64_t>(prompt.size()) || session.length() < p.prompt_done)
    fail("generate: prompt_done ", p.prompt_done, " with a prompt of ", prompt.size(), " and a session of ", session.length());
  const int64_t limit = generation_limit(model.summary(), p, session.length() - p.prompt_done, prompt.size());
  GenerateStats st;
  SpecStats local;
  SpecStats& ss = stats_out ? *stats_out : local;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (p.max_new <= 0) return st;

  Drafter* drafter = spec.drafter;
  if (drafter) model.set_capture_layers(drafter->capture_layers());
  auto tell_drafter = [&](size_t rows) {
    if (drafter) drafter->committed(model.captured(), rows);
  };

  const auto t0 = Clock::now();
  const std::span<const uint32_t> all(prompt);
  const std::function<bool()> cancelled = stop_requested(p);
  auto prefill_range = [&](int64_t from, int64_t to) {
    std::function<void(int64_t)> progress;
    if (p.on_prefill_progress) progress = [&, from](int64_t done) { p.on_prefill_progress(from + done); };
    return prefill(model, session, all.subspan(static_cast<size_t>(from), static_cast<size_t>(to - from)),
                   p.prefill_chunk, p.observer, cancelled, tell_drafter, p.prefill_group, progress);
  };
  // Up to each pause (a length some caller keeps), then the rest.
  int64_t from = p.prompt_done;
  for (int64_t at : p.pause_at) {
    if (!p.at_pause || at <= from || at >= static_cast<int64_t>(prompt.size())) continue;
    if (prefill_range(from, at).T == 0) return st.reason = StopReason::Interrupted, st;
    p.at_pause(session);
    from = at;
  }
  Rows logits = prefill_range(from, static_cast<int64_t>(prompt.size()));
  if (p.on_prefill_progress && logits.T != 0) p.on_prefill_progress(static_cast<int64_t>(prompt.size()));
  st.prefill_seconds = since(t0);
  if (logits.T == 0) return st.reason = StopReason::Interrupted, st;

  std::vector<uint32_t> history = prompt;
  const uint32_t next = argmax_first(logits.row(0), logits.n);
  st.ttft_seconds = since(t0);
  if (on_logits) on_logits(logits.row(0), logits.n);
  on_token(next);
  history.push_back(next);
  if (stop_after_token(p, next, ++st.new_tokens, session.length(), limit, st)) return st;

  SpeculativeStepper stepper(model, drafter, spec.max_draft, spec.fixed_k, &ss);
  if (!p.ignore_eos) stepper.set_draft_stop(p.eos);
  std::vector<std::vector<float>> rows;
  for (;;) {
    const int64_t base = session.length();
    const auto ts = Clock::now();
    // Never draft past what may still be emitted or past the context.
    const int64_t budget = std::min(p.max_new - st.new_tokens - 1, limit - base - 1);
    if (p.observer) p.observer->step_begin(false);
    const std::vector<uint32_t> chosen = stepper.step(session, history, budget, on_logits ? &rows : nullptr);
    if (p.observer) p.observer->step_end(false);
    // Each choice is handled as plain decoding would handle it, stopping where it would.
    size_t handled = 0;
    bool stopped = false;
    while (handled < chosen.size() && !stopped) {
      const uint32_t token = chosen[handled];
      if (on_logits) on_logits(rows[handled].data(), rows[handled].size());
      ++handled;
      on_token(token);
      history.push_back(token);
      stopped = stop_after_token(p, token, ++st.new_tokens, base + static_cast<int64_t>(handled), limit, st);
    }
    stepper.commit(session, handled);
    const double ms = since(ts) * 1e3;
    for (size_t i = 0; i < handled; ++i) st.token_ms.push_back(ms / static_cast<double>(handled));
    if (stopped) return st;
  }
}

}  // namespace deltafin
