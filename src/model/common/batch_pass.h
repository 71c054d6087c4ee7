// A batched pass's rows (CausalModel::forward_batch) as the families that
// batch lay them out: every part's rows stacked in part order, so the
// row-wise work (embedding, norms, the MLPs, the router, the routed experts,
// lm_head) runs once on the stack, and attention, the one step that reads a
// session, runs per part on that part's rows (attend_by_part). Every kernel
// computes each row on its own (docs/kernels.md: a product's rows do not
// depend on how many rows it is given), so a part's bits are those of its
// solo pass. A one-part pass is a forward(): its tokens are not copied and
// its attention runs on the stack itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/common/causal_model.h"
#include "model/common/rows.h"

namespace deltafin {

class BatchLayout {
public:
  // Lays out `parts` (already checked: check_batch_parts). Reuses its
  // vectors, so a pass of as many parts and rows as before allocates nothing.
  void lay_out(std::span<const BatchPart> parts);

  size_t parts() const { return first_.size() - 1; }
  size_t rows() const { return first_.back(); }                           // of the stack
  size_t first(size_t part) const { return first_[part]; }                // the part's first row in the stack
  size_t rows(size_t part) const { return first_[part + 1] - first_[part]; }
  std::span<const uint32_t> tokens() const { return tokens_; }          // the stack's, in row order

  // The stack's rows whose logits the pass returns, ascending: per part its
  // last row, or every row with all_logits.
  std::span<const uint32_t> logit_rows() const { return logit_rows_; }
  bool every_row_has_logits() const { return logit_rows_.size() == rows(); }
  // Hands each part its rows of `logits` ([logit_rows().size(), V]).
  void read_logits(Backend& be, const Act& logits, std::span<Rows> out) const;

private:
  std::vector<size_t> first_ = {0};  // part p: rows [first_[p], first_[p + 1])
  std::vector<uint32_t> stacked_;    // the tokens of a pass of several parts
  std::span<const uint32_t> tokens_;
  std::vector<uint32_t> logit_rows_;
  std::vector<size_t> logit_first_;  // part p's logits: rows [logit_first_[p], logit_first_[p + 1])
};

// Attention, per part: attend(p, in_p, out_p) -> bool (false: cancelled)
// on part p's rows of `in`, its output placed at those rows of `out`. `in`
// and `out` may be one Act (an attention that adds to its input in place:
// in_p and out_p are then one Act too). One part runs on `in` and `out`
// themselves, as a forward() did before there were batches.
template <typename Attend>
bool attend_by_part(Backend& be, const BatchLayout& batch, const Act& in, Act& out, Attend&& attend) {
  if (batch.parts() == 1) return attend(size_t{0}, in, out);
  const bool in_place = &in == &out;
  for (size_t p = 0; p < batch.parts(); ++p) {
    Act x = be.act(batch.rows(p), in.width());
    be.copy_rows(in, batch.first(p), x);
    Act separate = in_place ? Act() : be.act(batch.rows(p), out.width());
    Act& y = in_place ? x : separate;
    if (!attend(p, static_cast<const Act&>(x), y)) return false;
    be.place_rows(y, batch.first(p), out);
  }
  return true;
}

}  // namespace deltafin
