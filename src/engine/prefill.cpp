#include "engine/prefill.h"

#include <algorithm>

#include "engine/generate.h"
#include "util/error.h"

namespace deltafin {

uint64_t prefill_row_bytes(const K3Config& c) {
  // h, the block-partial p, both Mix outputs, the normed input, attention's
  // and the MLP's outputs (7 rows of width d), one anchor per AttnRes block,
  // and the router's and latent projection's rows.
  const uint64_t d = static_cast<uint64_t>(c.hidden_size);
  const uint64_t blocks = static_cast<uint64_t>((c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size);
  return 4 * (d * (7 + blocks) + static_cast<uint64_t>(c.num_experts + c.routed_expert_hidden_size));
}

int64_t prefill_group_rows(const K3Config& c, int64_t chunk, int64_t n) {
  if (chunk <= 0) return n;
  const int64_t fit = static_cast<int64_t>(kPrefillGroupBytes / prefill_row_bytes(c));
  return std::max<int64_t>(chunk, fit / chunk * chunk);
}

Rows prefill(K3Model& model, K3Session& session, std::span<const uint32_t> tokens, int64_t chunk,
             StepObserver* observer, const std::function<bool()>& cancelled,
             const std::function<void(size_t rows)>& after_pass, int64_t group,
             const std::function<void(int64_t done)>& progress) {
  if (tokens.empty()) fail("prefill: no tokens");
  const size_t n = tokens.size();
  if (group <= 0) group = prefill_group_rows(model.config(), chunk, static_cast<int64_t>(n));
  const size_t step = static_cast<size_t>(group);
  PassShape shape;
  shape.slice_rows = chunk > 0 ? static_cast<size_t>(chunk) : 0;
  shape.cancelled = cancelled;
  size_t at = 0, len = 0;
  if (progress) {
    const auto layers = static_cast<size_t>(model.config().num_hidden_layers);
    shape.on_layer = [&, layers](int64_t layer) { progress(static_cast<int64_t>(at + len * static_cast<size_t>(layer) / layers)); };
  }
  Rows logits;
  for (; at < n; at += step) {
    if (cancelled && cancelled()) return Rows();
    len = std::min(step, n - at);
    // A cancel inside the group leaves some layers ahead of others: back to here.
    K3Session::Snapshot before;
    if (cancelled) before = session.snapshot();
    if (observer) observer->step_begin(true);
    logits = model.forward(session, tokens.subspan(at, len), false, shape);
    if (observer) observer->step_end(true);
    if (logits.T == 0) {
      session.restore(before);
      return Rows();
    }
    if (after_pass) after_pass(len);
  }
  return logits;
}

}  // namespace deltafin
