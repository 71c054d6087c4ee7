#include "engine/prefill.h"

#include <algorithm>

#include "engine/generate.h"
#include "util/error.h"

namespace deltafin {

Rows prefill(K3Model& model, K3Session& session, std::span<const uint32_t> tokens, int64_t chunk,
             StepObserver* observer, const std::function<bool()>& cancelled,
             const std::function<void(size_t rows)>& after_pass) {
  if (tokens.empty()) fail("prefill: no tokens");
  const size_t n = tokens.size();
  const size_t step = chunk > 0 ? static_cast<size_t>(chunk) : n;
  Rows logits;
  for (size_t at = 0; at < n; at += step) {
    if (at > 0 && cancelled && cancelled()) return Rows();
    const size_t len = std::min(step, n - at);
    if (observer) observer->step_begin(true);
    logits = model.forward(session, tokens.subspan(at, len), false);
    if (observer) observer->step_end(true);
    if (after_pass) after_pass(len);
  }
  return logits;
}

}  // namespace deltafin
