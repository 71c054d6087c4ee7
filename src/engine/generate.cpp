#include "engine/generate.h"

#include <algorithm>

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

int64_t generation_limit(const ModelSummary& c, const GenerateParams& p, int64_t session_length, size_t prompt_tokens) {
  const int64_t limit = p.context_limit > 0 ? p.context_limit : c.context;
  if (prompt_tokens == 0) fail("generate: the prompt has no tokens");
  if (session_length + static_cast<int64_t>(prompt_tokens) > limit)
    fail("generate: the prompt (", prompt_tokens, " tokens) does not fit the context of ", limit, " tokens");
  return limit;
}

bool GenerateParams::ends_turn(uint32_t token) const {
  return !ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
}

bool stop_after_token(const GenerateParams& p, uint32_t token, int64_t new_tokens, int64_t length, int64_t limit,
                      GenerateStats& st) {
  if (p.ends_turn(token)) return st.reason = StopReason::Eos, true;
  if (new_tokens >= p.max_new) return st.reason = StopReason::MaxNew, true;
  if (length >= limit) return st.reason = StopReason::ContextFull, true;
  if ((p.stop && p.stop->load()) || (p.cancelled && p.cancelled())) return st.reason = StopReason::Interrupted, true;
  return false;
}

std::function<bool()> stop_requested(const GenerateParams& p) {
  if (!p.stop && !p.cancelled) return {};
  return [stop = p.stop, cancelled = p.cancelled] { return (stop && stop->load()) || (cancelled && cancelled()); };
}

}  // namespace deltafin
