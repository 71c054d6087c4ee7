#include "engine/generate.h"

#include <chrono>

#include "engine/prefill.h"
#include "util/error.h"

namespace deltafin {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Eos: return "end of message";
    case StopReason::MaxNew: return "max-new reached";
    case StopReason::ContextFull: return "context full";
    case StopReason::Interrupted: return "interrupted";
  }
  return "?";
}

int64_t generation_limit(const K3Config& c, const GenerateParams& p, int64_t session_length, size_t prompt_tokens) {
  const int64_t limit = p.context_limit > 0 ? p.context_limit : c.max_position_embeddings;
  if (prompt_tokens == 0) fail("generate: the prompt has no tokens");
  if (session_length + static_cast<int64_t>(prompt_tokens) > limit)
    fail("generate: the prompt (", prompt_tokens, " tokens) does not fit the context of ", limit, " tokens");
  return limit;
}

bool stop_after_token(const GenerateParams& p, uint32_t token, int64_t new_tokens, int64_t length, int64_t limit,
                      GenerateStats& st) {
  if (token == p.eos && !p.ignore_eos) return st.reason = StopReason::Eos, true;
  if (new_tokens >= p.max_new) return st.reason = StopReason::MaxNew, true;
  if (length >= limit) return st.reason = StopReason::ContextFull, true;
  if (p.stop && p.stop->load()) return st.reason = StopReason::Interrupted, true;
  return false;
}

std::function<bool()> stop_requested(const std::atomic<bool>* stop) {
  if (!stop) return {};
  return [stop] { return stop->load(); };
}

GenerateStats generate(K3Model& model, K3Session& session, const std::vector<uint32_t>& prompt,
                       const GenerateParams& p, const std::function<void(uint32_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  const int64_t limit = generation_limit(model.config(), p, session.length(), prompt.size());
  GenerateStats st;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (p.max_new <= 0) return st;

  auto t0 = clock::now();
  Rows logits = prefill(model, session, prompt, p.prefill_chunk, p.observer, stop_requested(p.stop), {}, p.prefill_group);
  st.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  if (logits.T == 0) return st.reason = StopReason::Interrupted, st;
  const size_t V = logits.n;
  for (;;) {
    uint32_t next = argmax_first(logits.row(0), V);
    if (st.new_tokens == 0) st.ttft_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    on_token(next);
    if (stop_after_token(p, next, ++st.new_tokens, session.length(), limit, st)) return st;
    auto ts = clock::now();
    const uint32_t one[1] = {next};
    if (p.observer) p.observer->step_begin(false);
    logits = model.forward(session, one, false);
    if (p.observer) p.observer->step_end(false);
    st.token_ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - ts).count());
  }
}

}  // namespace deltafin
