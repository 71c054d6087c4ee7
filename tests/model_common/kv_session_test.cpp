// The KV session and the session half of KvCacheModel
// (model/common/kv_session.h), through a tiny family whose forward() writes
// values that name their token, layer and column into the new positions, so
// every row a mark, copy, state or verification keeps can be checked by hand.
#include "model/common/kv_session.h"

#include <gtest/gtest.h>

#include <vector>

#include "support/test_support.h"
#include "util/error.h"

namespace deltafin {
namespace {

constexpr int64_t kLayers = 2, kKvDim = 3, kContext = 16, kVocab = 4;

// Key i of layer l at a position holding `token`; its value is the negative.
float key_of(uint32_t token, int64_t layer, int64_t i) {
  return static_cast<float>(token) + 100.0f * static_cast<float>(layer) + 0.25f * static_cast<float>(i);
}

// A family of kLayers layers whose forward() reserves, writes key_of into
// every new position and commits; token 99 throws half-way (nothing
// committed). Logits: row t is {token, position, 0, 0}.
class TinyKvModel : public KvCacheModel {
public:
  TinyKvModel() : KvCacheModel("Tiny", kLayers, kKvDim) { summary_.family = "tiny"; }
  const ModelSummary& summary() const override { return summary_; }
  const std::vector<std::vector<Route>>& last_routes() const override { return routes_; }

  Rows forward(ModelSession& model_session, std::span<const uint32_t> tokens, bool all_logits,
               const PassShape& = {}) override {
    KvSession& s = kv_session(model_session);
    const int64_t start = s.length(), T = static_cast<int64_t>(tokens.size());
    s.reserve(T);
    for (int64_t t = 0; t < T; ++t) {
      if (tokens[static_cast<size_t>(t)] == 99) fail("tiny: token 99");
      for (int64_t l = 0; l < kLayers; ++l)
        for (int64_t i = 0; i < kKvDim; ++i) {
          s.keys(l, start + t)[i] = key_of(tokens[static_cast<size_t>(t)], l, i);
          s.values(l, start + t)[i] = -key_of(tokens[static_cast<size_t>(t)], l, i);
        }
    }
    s.commit(T);
    const size_t rows = all_logits ? tokens.size() : 1, first = tokens.size() - rows;
    Rows logits(rows, kVocab);
    for (size_t r = 0; r < rows; ++r) {
      logits.row(r)[0] = static_cast<float>(tokens[first + r]);
      logits.row(r)[1] = static_cast<float>(start + static_cast<int64_t>(first + r));
    }
    return logits;
  }

protected:
  std::unique_ptr<KvSession> make_session(int64_t capacity) const override {
    return std::make_unique<KvSession>(kLayers, kKvDim, capacity > 0 ? capacity : kContext);
  }

private:
  ModelSummary summary_;
  std::vector<std::vector<Route>> routes_;
};

// The session holds exactly `tokens` (position p: tokens[p]), layer by layer.
void expect_holds(const ModelSession& session, const std::vector<uint32_t>& tokens) {
  const auto& s = dynamic_cast<const KvSession&>(session);
  ASSERT_EQ(s.length(), static_cast<int64_t>(tokens.size()));
  EXPECT_EQ(s.bytes(), tokens.size() * kLayers * kKvDim * 2 * sizeof(float));
  for (int64_t p = 0; p < s.length(); ++p)
    for (int64_t l = 0; l < kLayers; ++l)
      for (int64_t i = 0; i < kKvDim; ++i) {
        EXPECT_EQ(s.keys(l, p)[i], key_of(tokens[static_cast<size_t>(p)], l, i)) << "layer " << l << " position " << p;
        EXPECT_EQ(s.values(l, p)[i], -key_of(tokens[static_cast<size_t>(p)], l, i)) << "layer " << l << " position " << p;
      }
}

void run(TinyKvModel& m, ModelSession& s, std::vector<uint32_t> tokens) { m.forward(s, tokens, false); }

// ---- KvSession --------------------------------------------------------------

TEST(KvSession, ReserveCommitTruncateAndBytes) {
  KvSession s(kLayers, kKvDim, 5);
  EXPECT_EQ(s.capacity(), 5);
  EXPECT_EQ(s.length(), 0);
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_EQ(KvSession::bytes_per_position(kLayers, kKvDim), 48u);  // 2 layers x 3 x (key + value) x 4 B
  s.reserve(3);
  EXPECT_EQ(s.length(), 0);  // reserved rows are not held yet
  EXPECT_EQ(s.bytes(), 0u);
  s.keys(1, 2)[2] = 7.0f;
  s.commit(2);
  s.commit(1);  // a reservation may be committed in parts
  EXPECT_EQ(s.length(), 3);
  EXPECT_EQ(s.bytes(), 3 * 48u);
  EXPECT_EQ(s.keys(1, 2)[2], 7.0f);
  s.reserve(2);
  s.commit(2);
  EXPECT_EQ(s.length(), 5);
  s.truncate(4);
  EXPECT_EQ(s.length(), 4);
  EXPECT_EQ(s.bytes(), 4 * 48u);
  EXPECT_EQ(s.keys(1, 2)[2], 7.0f);  // the kept positions are untouched
  s.reset();
  EXPECT_EQ(s.length(), 0);
  EXPECT_EQ(s.bytes(), 0u);
}

TEST(KvSession, PlanLengthChangesNothingHeld) {
  KvSession s(kLayers, kKvDim, 8);
  s.reserve(2);
  s.keys(0, 1)[0] = 3.0f;
  s.commit(2);
  s.plan_length(100);  // past the capacity: clamped, no error
  s.plan_length(-1);
  EXPECT_EQ(s.length(), 2);
  EXPECT_EQ(s.bytes(), 2 * 48u);
  EXPECT_EQ(s.keys(0, 1)[0], 3.0f);
}

TEST(KvSession, RefusesWhatItCannotHold) {
  EXPECT_FAILS_WITH(KvSession(kLayers, kKvDim, 0), "KV session", "capacity 0 is not positive");
  EXPECT_FAILS_WITH(KvSession(kLayers, kKvDim, -3), "capacity -3 is not positive");
  KvSession s(kLayers, kKvDim, 4);
  EXPECT_FAILS_WITH(s.reserve(5), "0 cached + 5 new positions exceed the capacity of 4");
  EXPECT_FAILS_WITH(s.reserve(-1), "+ -1 new positions");
  EXPECT_FAILS_WITH(s.commit(1), "commit of 1 positions that were not reserved");
  s.reserve(3);
  EXPECT_FAILS_WITH(s.commit(4), "commit of 4 positions that were not reserved");
  s.commit(3);
  EXPECT_FAILS_WITH(s.commit(1), "commit of 1 positions that were not reserved");
  EXPECT_FAILS_WITH(s.reserve(2), "3 cached + 2 new positions exceed the capacity of 4");
  EXPECT_FAILS_WITH(s.truncate(4), "cannot truncate to length 4; it holds 3 positions");
  EXPECT_FAILS_WITH(s.truncate(-1), "cannot truncate to length -1");
  s.truncate(1);
  // A truncation drops the reservation beyond it too.
  EXPECT_FAILS_WITH(s.commit(1), "commit of 1 positions that were not reserved");
  EXPECT_EQ(s.length(), 1);
}

// ---- KvCacheModel: marks ----------------------------------------------------

TEST(KvCacheModel, RewindReturnsToTheMarkAndNewTokensFollowIt) {
  TinyKvModel m;
  auto s = m.new_session();
  run(m, *s, {1, 2, 3});
  const auto mark = m.mark(*s);
  EXPECT_EQ(mark->length, 3);
  run(m, *s, {0, 1});
  expect_holds(*s, {1, 2, 3, 0, 1});
  m.rewind(*s, *mark);
  expect_holds(*s, {1, 2, 3});
  run(m, *s, {2});
  expect_holds(*s, {1, 2, 3, 2});
  // Cut below the mark, then back to it: refused (the rows are gone).
  const auto early = std::make_shared<SessionMark>();
  early->length = 1;
  m.rewind(*s, *early);
  expect_holds(*s, {1});
  EXPECT_FAILS_WITH(m.rewind(*s, *mark), "Tiny session", "the mark is at 3, past the session's 1");
}

// A mark of a family whose marks carry more than a length (K3's carry the
// KDA state) cannot be honoured by truncating.
struct OtherFamilyMark : SessionMark {};

TEST(KvCacheModel, RefusesAnotherFamilysMarkAndSession) {
  TinyKvModel m;
  auto s = m.new_session();
  run(m, *s, {1, 2});
  OtherFamilyMark other;
  other.length = 1;
  EXPECT_FAILS_WITH(m.rewind(*s, other), "Tiny model", "another model family");
  EXPECT_FAILS_WITH(m.copy_at(*s, other), "Tiny model", "another model family");
  EXPECT_FAILS_WITH(m.for_each_state_part(*s, other, [](const float*, size_t) {}), "Tiny model", "another model family");
  expect_holds(*s, {1, 2});

  struct OtherSession : ModelSession {
    int64_t length() const override { return 0; }
    uint64_t bytes() const override { return 0; }
  } foreign;
  EXPECT_FAILS_WITH(m.mark(foreign), "Tiny model", "the session belongs to another model family");
  EXPECT_FAILS_WITH(m.forward(foreign, std::vector<uint32_t>{1}, false), "Tiny", "another model family");
  // A KvSession of another shape (another model of a KV family).
  KvSession wide(kLayers, kKvDim + 1, 8);
  EXPECT_FAILS_WITH(m.mark(wide), "Tiny", "another model shape", "kv_dim 4");
  KvSession deep(kLayers + 1, kKvDim, 8);
  EXPECT_FAILS_WITH(m.mark(deep), "Tiny", "another model shape", "3 layers");
}

// ---- copy_at ------------------------------------------------------------------

TEST(KvCacheModel, CopyAtTakesTheMarkedRowsAndStaysApart) {
  TinyKvModel m;
  auto s = m.new_session();
  run(m, *s, {3, 1, 2});
  const auto at3 = m.mark(*s);
  run(m, *s, {0, 0});
  auto copy = m.copy_at(*s, *at3);
  expect_holds(*copy, {3, 1, 2});  // only the marked rows: bytes() counts 3
  EXPECT_EQ(dynamic_cast<const KvSession&>(*copy).capacity(), kContext);
  expect_holds(*s, {3, 1, 2, 0, 0});  // the original is not changed
  // Nothing reserved past the copy's rows (a whole-cache copy, cut back,
  // would hold them, and its memory would exceed what bytes() counts).
  EXPECT_FAILS_WITH(dynamic_cast<KvSession&>(*copy).commit(1), "commit of 1 positions that were not reserved");
  // Neither sees the other's later changes.
  m.rewind(*s, *std::make_shared<SessionMark>());
  run(m, *s, {2, 2});
  run(m, *copy, {1});
  expect_holds(*copy, {3, 1, 2, 1});
  expect_holds(*s, {2, 2});
  // A copy at 0 is an empty session of the same capacity.
  auto empty = m.copy_at(*s, SessionMark{});
  expect_holds(*empty, {});
  run(m, *empty, {3});
  expect_holds(*empty, {3});
}

// ---- states ---------------------------------------------------------------------

TEST(KvCacheModel, StateRunsAreTheRowsLayerByLayerAndReadBack) {
  TinyKvModel m;
  auto s = m.new_session();
  run(m, *s, {2, 0, 3});
  const auto at2 = m.mark(*s);
  at2->length = 2;  // a mark taken at 2: the session has grown since
  EXPECT_EQ(m.state_values(2), 2u * kLayers * kKvDim * 2);
  EXPECT_EQ(m.state_values(0), 0u);
  EXPECT_EQ(m.state_values(-4), 0u);

  std::vector<float> state;
  std::vector<size_t> runs;
  m.for_each_state_part(*s, *at2, [&](const float* v, size_t n) {
    runs.push_back(n);
    state.insert(state.end(), v, v + n);
  });
  // Layer 0 keys, layer 0 values, layer 1 keys, layer 1 values; each [2, 3].
  EXPECT_EQ(runs, (std::vector<size_t>(4, 2 * kKvDim)));
  std::vector<float> want;
  for (int64_t l = 0; l < kLayers; ++l)
    for (float sign : {1.0f, -1.0f})
      for (uint32_t token : {2u, 0u})
        for (int64_t i = 0; i < kKvDim; ++i) want.push_back(sign * key_of(token, l, i));
  EXPECT_EQ(state, want);
  EXPECT_EQ(state.size(), m.state_values(2));

  auto fresh = m.new_session();
  size_t at = 0;
  m.read_state(*fresh, 2, [&](float* v, size_t n) {
    ASSERT_LE(at + n, state.size());
    std::copy_n(state.data() + at, n, v);
    at += n;
  });
  EXPECT_EQ(at, state.size());
  expect_holds(*fresh, {2, 0});
  run(m, *fresh, {1});  // it continues like the original would
  expect_holds(*fresh, {2, 0, 1});
}

TEST(KvCacheModel, ReadStateRefusesASessionThatHoldsPositions) {
  TinyKvModel m;
  auto s = m.new_session();
  run(m, *s, {1});
  int reads = 0;
  EXPECT_FAILS_WITH(m.read_state(*s, 1, [&](float*, size_t) { ++reads; }), "Tiny session state",
                    "restore needs a fresh session");
  EXPECT_EQ(reads, 0);
  expect_holds(*s, {1});
  auto fresh = m.new_session();
  EXPECT_FAILS_WITH(m.read_state(*fresh, kContext + 1, [&](float*, size_t) { ++reads; }), "exceed the capacity of 16");
  EXPECT_EQ(reads, 0);
}

// ---- verification ---------------------------------------------------------------

TEST(KvCacheModel, KeepVerifiedKeepsExactlyTheFirstRows) {
  for (size_t keep = 1; keep <= 4; ++keep) {
    SCOPED_TRACE(testing::Message() << "keep " << keep);
    TinyKvModel m;
    auto s = m.new_session();
    run(m, *s, {1, 1});
    const std::vector<uint32_t> draft = {2, 3, 0, 2};
    const Rows logits = m.forward_verify(*s, draft);
    ASSERT_EQ(logits.T, 4u);  // every row's logits
    for (size_t t = 0; t < 4; ++t) {
      EXPECT_EQ(logits.row(t)[0], static_cast<float>(draft[t]));
      EXPECT_EQ(logits.row(t)[1], static_cast<float>(2 + t));
    }
    m.keep_verified(*s, keep);
    std::vector<uint32_t> want = {1, 1};
    want.insert(want.end(), draft.begin(), draft.begin() + static_cast<std::ptrdiff_t>(keep));
    expect_holds(*s, want);
    // Once only: the pass is spent.
    EXPECT_FAILS_WITH(m.keep_verified(*s, 1), "verifier", "cannot commit 1 rows of a 0-row pass");
  }
}

TEST(KvCacheModel, KeepVerifiedRefusesBadRowCountsAndASessionWithoutAPass) {
  TinyKvModel m;
  auto s = m.new_session(), other = m.new_session();
  run(m, *s, {1});
  run(m, *other, {1});
  m.forward_verify(*s, std::vector<uint32_t>{2, 3, 0});
  EXPECT_FAILS_WITH(m.keep_verified(*s, 0), "verifier", "cannot commit 0 rows of a 3-row pass");
  EXPECT_FAILS_WITH(m.keep_verified(*s, 4), "verifier", "cannot commit 4 rows of a 3-row pass");
  // The other session verified nothing: it has no pass to keep.
  EXPECT_FAILS_WITH(m.keep_verified(*other, 2), "verifier", "cannot commit 2 rows of a 0-row pass");
  expect_holds(*other, {1});
  expect_holds(*s, {1, 2, 3, 0});  // the refusals left the pass as it was
  m.keep_verified(*s, 2);
  expect_holds(*s, {1, 2, 3});
}

// Each session keeps its own pass: A verifies, B verifies, then each keeps
// part of its pass, in either order, and holds what verifying and keeping
// alone leaves.
TEST(KvCacheModel, InterleavedVerificationsKeepWhatEachAloneKeeps) {
  for (bool a_first : {true, false}) {
    SCOPED_TRACE(a_first ? "A kept first" : "B kept first");
    TinyKvModel m;
    auto a = m.new_session(), b = m.new_session();
    run(m, *a, {1, 1});
    run(m, *b, {2});
    const Rows la = m.forward_verify(*a, std::vector<uint32_t>{2, 3, 0});
    const Rows lb = m.forward_verify(*b, std::vector<uint32_t>{3, 1, 1, 2});
    EXPECT_EQ(la.row(2)[1], 4.0f);  // positions 2, 3, 4
    EXPECT_EQ(lb.row(3)[1], 4.0f);  // positions 1 ... 4
    if (a_first) {
      m.keep_verified(*a, 2);
      m.keep_verified(*b, 3);
    } else {
      m.keep_verified(*b, 3);
      m.keep_verified(*a, 2);
    }
    expect_holds(*a, {1, 1, 2, 3});
    expect_holds(*b, {2, 3, 1, 1});
    EXPECT_FAILS_WITH(m.keep_verified(*a, 1), "verifier", "of a 0-row pass");
    EXPECT_FAILS_WITH(m.keep_verified(*b, 1), "verifier", "of a 0-row pass");
  }
}

TEST(KvCacheModel, AVerifyPassThatThrowsLeavesNothingToKeep) {
  TinyKvModel m;
  auto s = m.new_session();
  run(m, *s, {1});
  // A verified pass whose rows were never kept (its caller gave up), then
  // one that throws before its commit: keep_verified acts on neither.
  m.forward_verify(*s, std::vector<uint32_t>{2, 3});
  EXPECT_FAILS_WITH(m.forward_verify(*s, std::vector<uint32_t>{3, 99, 0}), "tiny: token 99");
  expect_holds(*s, {1, 2, 3});
  EXPECT_FAILS_WITH(m.keep_verified(*s, 1), "verifier", "of a 0-row pass");
  expect_holds(*s, {1, 2, 3});
}


// ---- forward_batch: the default, one forward() per part ----------------------------

// Every part's logits and session as forward() alone gives them.
TEST(CausalModelBatch, TheDefaultRunsEachPartAsForwardWould) {
  TinyKvModel m;
  auto a = m.new_session(), b = m.new_session(), c = m.new_session();
  run(m, *b, {1, 2});
  const std::vector<uint32_t> ta = {3}, tb = {0, 1, 2}, tc = {2, 2};
  const std::vector<Rows> got = m.forward_batch(std::vector<BatchPart>{{a.get(), ta, false}, {b.get(), tb, true},
                                                                       {c.get(), tc, false}});
  ASSERT_EQ(got.size(), 3u);
  // Row t of a part's logits: {token, position}.
  ASSERT_EQ(got[0].T, 1u);
  EXPECT_EQ(got[0].row(0)[0], 3.0f);
  EXPECT_EQ(got[0].row(0)[1], 0.0f);
  ASSERT_EQ(got[1].T, 3u);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(got[1].row(t)[0], static_cast<float>(tb[t]));
    EXPECT_EQ(got[1].row(t)[1], static_cast<float>(2 + t));
  }
  ASSERT_EQ(got[2].T, 1u);
  EXPECT_EQ(got[2].row(0)[1], 1.0f);  // the last of positions 0, 1
  expect_holds(*a, {3});
  expect_holds(*b, {1, 2, 0, 1, 2});
  expect_holds(*c, {2, 2});
}

// A model that captures rows but lets the default batch: refused, since one
// forward() per part cannot stack the parts' captures.
class CapturingTinyKvModel : public TinyKvModel {
public:
  const Rows& captured() const override { return rows_; }

private:
  Rows rows_ = Rows(1, 2);
};

TEST(CausalModelBatch, RefusesBadParts) {
  TinyKvModel m;
  auto a = m.new_session(), b = m.new_session();
  const std::vector<uint32_t> ok = {1}, none;
  EXPECT_FAILS_WITH(m.forward_batch({}), "forward_batch: no parts");
  EXPECT_FAILS_WITH(m.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {b.get(), none}}), "part 1 has no tokens");
  EXPECT_FAILS_WITH(m.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {nullptr, ok}}), "part 1 has no session");
  EXPECT_FAILS_WITH(m.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {b.get(), ok}, {a.get(), ok}}),
                    "parts 0 and 2 share a session");
  expect_holds(*a, {});
  expect_holds(*b, {});
  CapturingTinyKvModel capturing;
  auto c = capturing.new_session(), d = capturing.new_session();
  EXPECT_EQ(capturing.forward_batch(std::vector<BatchPart>{{c.get(), ok}}).size(), 1u);  // one part: its own capture
  EXPECT_FAILS_WITH(capturing.forward_batch(std::vector<BatchPart>{{c.get(), ok}, {d.get(), ok}}), "captures hidden rows",
                    "cannot stack");
}

}  // namespace
}  // namespace deltafin
