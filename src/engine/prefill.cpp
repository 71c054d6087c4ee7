#include "engine/prefill.h"

#include <algorithm>

#include "engine/generate.h"
#include "util/error.h"

namespace deltafin {

int64_t prefill_group_rows(const ModelSummary& m, int64_t chunk, int64_t n) {
  if (chunk <= 0) return n;
  const int64_t fit = static_cast<int64_t>(kPrefillGroupBytes / std::max<uint64_t>(m.pass_row_bytes, 1));
  return std::max<int64_t>(chunk, fit / chunk * chunk);
}

Rows prefill(CausalModel& model, ModelSession& session, std::span<const uint32_t> tokens, int64_t chunk,
             StepObserver* observer, const std::function<bool()>& cancelled,
             const std::function<void(size_t rows)>& after_pass, int64_t group,
             const std::function<void(int64_t done)>& progress) {
  if (tokens.empty()) fail("prefill: no tokens");
  const size_t n = tokens.size();
  if (group <= 0) group = prefill_group_rows(model.summary(), chunk, static_cast<int64_t>(n));
  const size_t step = static_cast<size_t>(group);
  PassShape shape;
  shape.slice_rows = chunk > 0 ? static_cast<size_t>(chunk) : 0;
  shape.cancelled = cancelled;
  size_t at = 0, len = 0;
  if (progress) {
    const auto layers = static_cast<size_t>(model.summary().layers);
    shape.on_layer = [&, layers](int64_t layer) { progress(static_cast<int64_t>(at + len * static_cast<size_t>(layer) / layers)); };
    shape.on_rows = [&](size_t rows) { progress(static_cast<int64_t>(at + rows)); };
  }
  Rows logits;
  for (; at < n; at += step) {
    if (cancelled && cancelled()) return Rows();
    len = std::min(step, n - at);
    // A cancel inside the group leaves some layers ahead of others: back to here.
    std::shared_ptr<SessionMark> before;
    if (cancelled) before = model.mark(session);
    if (observer) observer->step_begin(true);
    logits = model.forward(session, tokens.subspan(at, len), false, shape);
    if (observer) observer->step_end(true);
    if (logits.T == 0) {
      model.rewind(session, *before);
      return Rows();
    }
    if (after_pass) after_pass(len);
  }
  return logits;
}

}  // namespace deltafin
