// The reference every speculation test compares with: plain greedy decoding
// by hand, the prompt in one pass and then one position at a time, through
// the model's own forward() (not generate(), which is under test elsewhere).
#pragma once

#include <vector>

#include "model/kimi_k3/model.h"

namespace deltafin::test {

struct PlainRun {
  std::vector<uint32_t> tokens;
  std::vector<std::vector<float>> logits;  // the row behind each token
  K3Session session;                       // after the run: the prompt and every token but the last
  explicit PlainRun(const K3Config& c) : session(c) {}
};

inline PlainRun decode_plain(K3Model& model, const std::vector<uint32_t>& prompt, int64_t max_new) {
  PlainRun p(model.config());
  Rows l = model.forward(p.session, prompt, false);
  for (int64_t i = 0;; ++i) {
    p.logits.emplace_back(l.row(0), l.row(0) + l.n);
    p.tokens.push_back(argmax_first(l.row(0), l.n));
    if (i + 1 == max_new) break;
    const uint32_t one[1] = {p.tokens.back()};
    l = model.forward(p.session, one, false);
  }
  return p;
}

}  // namespace deltafin::test
