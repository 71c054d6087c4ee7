#include "model/common/batch_pass.h"

#include "util/error.h"

namespace deltafin {

void BatchLayout::lay_out(std::span<const BatchPart> parts) {
  first_.assign(1, 0);
  logit_rows_.clear();
  logit_first_.assign(1, 0);
  for (const BatchPart& part : parts) {
    const size_t at = first_.back(), T = part.tokens.size();
    first_.push_back(at + T);
    for (size_t t = part.all_logits ? 0 : T - 1; t < T; ++t) logit_rows_.push_back(static_cast<uint32_t>(at + t));
    logit_first_.push_back(logit_rows_.size());
  }
  if (parts.size() == 1) {
    tokens_ = parts[0].tokens;
    return;
  }
  stacked_.clear();
  for (const BatchPart& part : parts) stacked_.insert(stacked_.end(), part.tokens.begin(), part.tokens.end());
  tokens_ = stacked_;
}

void BatchLayout::read_logits(Backend& be, const Act& logits, std::span<Rows> out) const {
  if (out.size() != parts() || logits.rows() != logit_rows_.size())
    fail("batch: logits of ", logits.rows(), " rows for ", out.size(), " parts of ", logit_rows_.size(), " logit rows");
  for (size_t p = 0; p < parts(); ++p) {
    out[p] = Rows(logit_first_[p + 1] - logit_first_[p], logits.width());
    be.read(logits, logit_first_[p], out[p].v);
  }
}

}  // namespace deltafin
