// The routed-experts block every MoE family shares (llama.cpp's
// build_moe_ffn is the model): given the rows of a layer and their routes,
//   out[t] = sum over i of w_ti * expert_{e_ti}(in[t])
// with each expert fetched once from the ExpertSource and applied to every
// row routed to it as one batched product, experts computed as they become
// ready (hits first, misses as their reads land), each result kept at its
// (row, slot) place, and the combine run in the decided order, so neither
// arrival order nor grouping changes a bit. The family says only what an
// expert is: its record's layout (ExpertMlp). Once a layer has run with as
// many rows, a call takes no new activation buffer (they come from the
// backend's pool) and its bookkeeping reuses its vectors; what is left is a
// few std::function wrappers per call (the group callback, the per-expert
// task), whose captures do not fit the small-buffer optimisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/common/expert_source.h"
#include "model/common/route.h"

namespace deltafin {

// One expert as its record holds it: a gated MLP
//   y = down(gate_fn(gate x, up x)), gate and up [mid, in], down [out, mid],
// each tensor at a byte offset of the record, in one storage type (MXFP4,
// FP8Block and Int4Group32 tensors carry their scales at their own offset).
struct ExpertMlp {
  WeightType type = WeightType::BF16;
  size_t in = 0, mid = 0, out = 0;
  uint64_t gate = 0, up = 0, down = 0;                     // byte offsets of the values
  uint64_t gate_scales = 0, up_scales = 0, down_scales = 0;  // MXFP4, FP8Block, Int4Group32
  Gate fn;
  WeightView gate_view(const uint8_t* record) const;
  WeightView up_view(const uint8_t* record) const;
  WeightView down_view(const uint8_t* record) const;
};

// WeightView::key of tensor `part` (0 gate, 1 up, 2 down) of a routed
// expert: its bytes are the store's record of (layer, expert), which never
// changes.
uint64_t expert_weight_key(int64_t layer, int64_t expert, int part);

class RoutedExperts {
public:
  RoutedExperts(Backend& backend, ExpertSource& source, ExpertMlp mlp, size_t num_experts);

  // out [routes.size(), mlp.out] for rows first ... of `in` ([*, mlp.in]),
  // whose routes are `routes` (every Route of the same k). `cancelled`, when
  // set, is asked before each ready group: once it says true no further
  // expert is computed (the source still hands every one over) and run()
  // returns false with `out` unspecified.
  bool run(int64_t layer, const Act& in, size_t first, std::span<const Route> routes, Act& out,
           const std::function<bool()>& cancelled = {});

  const ExpertMlp& mlp() const { return mlp_; }

private:
  void plan(std::span<const Route> routes, size_t first);
  void compute(const ReadyExpert& ready, const Act& in, Act& expert_out);

  Backend& be_;
  ExpertSource& source_;
  ExpertMlp mlp_;
  size_t num_experts_;
  // The plan of one call, reused: the experts needed (ascending), and for
  // needed expert j its users [begin_[j], begin_[j + 1]) in (row, slot) order:
  // the input row each reads and the [row * k + slot] place its result goes.
  std::vector<uint32_t> count_;
  std::vector<int64_t> needed_;
  std::vector<size_t> begin_, rows_per_expert_, group_rows_;
  std::vector<uint32_t> in_rows_, out_rows_;
  std::vector<float> weights_;
  int64_t layer_ = -1;  // of the call in progress (the weights' keys)
};

}  // namespace deltafin
