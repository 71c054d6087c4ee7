// forward_batch against forward(), bit for bit, shared by the families'
// tests: sessions run as parts of one batched pass beside copies of them run
// each alone, then compared (logits, lengths, captured rows). Header-only:
// it needs nothing but the family interface.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/common/causal_model.h"

namespace deltafin::test {

inline bool same_bits(const Rows& a, const Rows& b) {
  return a.T == b.T && a.n == b.n && a.v.size() == b.v.size() &&
         (a.v.empty() || std::memcmp(a.v.data(), b.v.data(), a.v.size() * sizeof(float)) == 0);
}

// Sessions that go through forward_batch, each beside a copy of it (taken
// when added) that goes through forward() alone.
struct BatchBeside {
  explicit BatchBeside(CausalModel& m) : model(m) {}
  CausalModel& model;
  std::vector<std::unique_ptr<ModelSession>> batched, solo;
  void add(std::unique_ptr<ModelSession> s) {
    const auto at = model.mark(*s);
    solo.push_back(model.copy_at(*s, *at));
    batched.push_back(std::move(s));
  }
};

// One part of a step: rows for session `session` of a BatchBeside.
struct StepPart {
  size_t session = 0;
  std::vector<uint32_t> tokens;
  bool all_logits = false;
};

// Runs `parts` as one forward_batch on the batched sessions, then each part
// alone on its solo copy (same shape): every part's logits equal bit for bit,
// every session as long as its copy, and the batch's captured() rows equal
// the solo passes' captures stacked in part order. Returns the batch's
// captured rows (0 when the model captures nothing).
inline size_t expect_batch_equals_solo(BatchBeside& b, const std::vector<StepPart>& parts, const PassShape& shape = {}) {
  std::vector<BatchPart> batch;
  for (const StepPart& p : parts) batch.push_back({b.batched[p.session].get(), p.tokens, p.all_logits});
  const std::vector<Rows> got = b.model.forward_batch(batch, shape);
  const Rows captured = b.model.captured();
  EXPECT_EQ(got.size(), parts.size());
  Rows stacked(0, captured.n);
  for (size_t i = 0; i < parts.size() && i < got.size(); ++i) {
    SCOPED_TRACE("part " + std::to_string(i) + " (session " + std::to_string(parts[i].session) + ")");
    const StepPart& p = parts[i];
    const Rows want = b.model.forward(*b.solo[p.session], p.tokens, p.all_logits, shape);
    EXPECT_EQ(want.T, p.all_logits ? p.tokens.size() : 1u);
    EXPECT_TRUE(same_bits(got[i], want)) << "the batch's logits differ from the part's solo pass";
    EXPECT_EQ(b.batched[p.session]->length(), b.solo[p.session]->length());
    const Rows& c = b.model.captured();
    EXPECT_EQ(c.n, captured.n);
    stacked.v.insert(stacked.v.end(), c.v.begin(), c.v.end());
    stacked.T += c.T;
  }
  EXPECT_TRUE(same_bits(captured, stacked)) << "the batch's captured rows are not the parts' stacked in order";
  return captured.T;
}

// One more token on every session, batched and alone: equal logits say the
// sessions advanced alike.
inline void expect_next_tokens_agree(BatchBeside& b, uint32_t token) {
  std::vector<StepPart> parts;
  for (size_t i = 0; i < b.batched.size(); ++i) parts.push_back({i, {token}, false});
  expect_batch_equals_solo(b, parts);
}

// One more token on every session by plain forward(), batched sessions and
// their copies alike: equal logits and lengths say the batch left each
// session as its solo passes left the copy.
inline void expect_sessions_agree(BatchBeside& b, uint32_t token) {
  for (size_t i = 0; i < b.batched.size(); ++i) {
    SCOPED_TRACE("session " + std::to_string(i));
    const Rows x = b.model.forward(*b.batched[i], std::span<const uint32_t>(&token, 1), false);
    const Rows y = b.model.forward(*b.solo[i], std::span<const uint32_t>(&token, 1), false);
    EXPECT_TRUE(same_bits(x, y));
    EXPECT_EQ(b.batched[i]->length(), b.solo[i]->length());
  }
}

}  // namespace deltafin::test
