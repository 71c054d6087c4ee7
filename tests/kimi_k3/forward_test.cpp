// The fast fp32 forward pass against the independent float64 reference, and
// its bit-identity guarantees (batch size, chunking, threads, rollback).
#include "model/kimi_k3/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "model/kimi_k3/load/loaded_k3.h"
#include "kernels/isa.h"
#include "model/kimi_k3/generator.h"
#include "kimi_k3/reference_k3.h"
#include "support/batch_compare.h"
#include "support/session_compare.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;

namespace {

// One tiny checkpoint per seed, generated once per test process.
const std::string& tiny_dir(uint64_t seed) {
  static std::map<uint64_t, std::unique_ptr<test::TempDir>> dirs;
  auto& d = dirs[seed];
  if (!d) {
    d = std::make_unique<test::TempDir>();
    GenerateOptions o;
    o.out_dir = d->path();
    o.seed = seed;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
  }
  return d->path();
}

std::vector<uint32_t> prompt_tokens(uint64_t seed, size_t n, uint32_t vocab) { return test::random_tokens(seed, n, vocab); }

double rel_l2(const float* a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = a[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

class ForwardVsReference : public ::testing::TestWithParam<uint64_t> {};

TEST_P(ForwardVsReference, AllPositionsWithinTolerance) {
  const uint64_t seed = GetParam();
  auto m = load_k3_resident(tiny_dir(seed), 1);
  const K3Config& c = m->config;
  std::vector<uint32_t> tokens = prompt_tokens(seed, 16, static_cast<uint32_t>(c.vocab_size));
  K3Session s(c);
  Rows logits = m->model->forward(s, tokens, true);

  // Hold the expert selection fixed at ours (k3-model.md §12), then compare.
  std::vector<std::vector<std::vector<int>>> forced(static_cast<size_t>(c.num_hidden_layers));
  for (size_t l = 1; l < forced.size(); ++l)
    for (const Route& r : m->model->last_routes()[l]) forced[l].emplace_back(r.experts.begin(), r.experts.end());
  test::ReferenceOptions opt;
  opt.forced_routes = &forced;
  test::ReferenceResult ref = test::reference_forward(load_k3_checkpoint(tiny_dir(seed)), tokens, opt);

  double worst = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    double e = rel_l2(logits.row(t), ref.logits[t]);
    worst = std::max(worst, e);
    EXPECT_LE(e, 1e-5) << "position " << t;
  }
  RecordProperty("worst_rel_l2", std::to_string(worst));
  std::printf("[ reference ] seed %llu: worst relative L2 error over %zu positions: %.3g\n",
              static_cast<unsigned long long>(seed), tokens.size(), worst);

  // Our own selections agree with the reference's wherever its margin is clear.
  test::ReferenceResult free_ref = test::reference_forward(load_k3_checkpoint(tiny_dir(seed)), tokens);
  for (size_t l = 1; l < forced.size(); ++l)
    for (size_t t = 0; t < tokens.size(); ++t)
      if (free_ref.route_margins[l][t] > 1e-4) {
        EXPECT_EQ(forced[l][t], free_ref.routes[l][t]) << "layer " << l << " pos " << t;
      }
}

TEST_P(ForwardVsReference, GreedyTokensAgreeFor32Steps) {
  const uint64_t seed = GetParam();
  auto m = load_k3_resident(tiny_dir(seed), 1);
  const K3Config& c = m->config;
  std::vector<uint32_t> seq = prompt_tokens(seed + 100, 6, static_cast<uint32_t>(c.vocab_size));
  const size_t prompt = seq.size();
  K3Session s(c);
  Rows logits = m->model->forward(s, seq, false);
  for (int step = 0; step < 32; ++step) {
    uint32_t next = argmax_first(logits.row(0), logits.n);
    seq.push_back(next);
    const uint32_t one[1] = {next};
    logits = m->model->forward(s, one, false);
  }
  // Teacher-forced reference over the whole sequence: its argmax at each position
  // must be the token we generated there.
  test::ReferenceResult ref = test::reference_forward(load_k3_checkpoint(tiny_dir(seed)), seq);
  for (size_t t = prompt - 1; t + 1 < seq.size(); ++t) {
    const std::vector<double>& r = ref.logits[t];
    size_t best = 0;
    for (size_t i = 1; i < r.size(); ++i)
      if (r[i] > r[best]) best = i;
    EXPECT_EQ(best, seq[t + 1]) << "step " << t + 1 - prompt;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, ForwardVsReference, ::testing::Values(1, 2, 3));

TEST(ForwardBitIdentity, DecodeEqualsOnePassEqualsChunksOfThree) {
  auto m = load_k3_resident(tiny_dir(1), 1);
  const K3Config& c = m->config;
  std::vector<uint32_t> tokens = prompt_tokens(9, 11, static_cast<uint32_t>(c.vocab_size));
  const size_t V = static_cast<size_t>(c.vocab_size);

  K3Session a(c);
  Rows whole = m->model->forward(a, tokens, true);

  K3Session b(c);
  std::vector<float> stepwise;
  for (uint32_t t : tokens) {
    const uint32_t one[1] = {t};
    Rows r = m->model->forward(b, one, true);
    stepwise.insert(stepwise.end(), r.v.begin(), r.v.end());
  }
  K3Session d(c);
  std::vector<float> chunked;
  for (size_t i = 0; i < tokens.size(); i += 3) {
    std::span<const uint32_t> part(tokens.data() + i, std::min<size_t>(3, tokens.size() - i));
    Rows r = m->model->forward(d, part, true);
    chunked.insert(chunked.end(), r.v.begin(), r.v.end());
  }
  ASSERT_EQ(whole.v.size(), tokens.size() * V);
  EXPECT_EQ(std::memcmp(whole.v.data(), stepwise.data(), whole.v.size() * 4), 0);
  EXPECT_EQ(std::memcmp(whole.v.data(), chunked.data(), whole.v.size() * 4), 0);
}

// With 2 and 3 threads a layer's experts go to the threads whole (decode:
// one row each) or, when they do not balance, each product splits by rows
// (backend/expert_group.h); either way the bits are one thread's.
TEST(ForwardBitIdentity, OneThreadEqualsTwoAndThreeThreads) {
  auto m1 = load_k3_resident(tiny_dir(2), 1);
  const K3Config& c = m1->config;
  std::vector<uint32_t> tokens = prompt_tokens(4, 9, static_cast<uint32_t>(c.vocab_size));
  K3Session a(c);
  Rows x = m1->model->forward(a, tokens, true);
  K3Session a_steps(c);
  std::vector<float> x_steps;
  for (uint32_t t : tokens) {
    Rows r = m1->model->forward(a_steps, std::span<const uint32_t>(&t, 1), true);
    x_steps.insert(x_steps.end(), r.v.begin(), r.v.end());
  }
  for (int threads : {2, 3}) {
    SCOPED_TRACE(threads);
    auto m = load_k3_resident(tiny_dir(2), threads);
    K3Session b(c), b_steps(c);
    Rows y = m->model->forward(b, tokens, true);
    ASSERT_EQ(x.v.size(), y.v.size());
    EXPECT_EQ(std::memcmp(x.v.data(), y.v.data(), x.v.size() * 4), 0);
    std::vector<float> y_steps;
    for (uint32_t t : tokens) {
      Rows r = m->model->forward(b_steps, std::span<const uint32_t>(&t, 1), true);
      y_steps.insert(y_steps.end(), r.v.begin(), r.v.end());
    }
    ASSERT_EQ(x_steps.size(), y_steps.size());
    EXPECT_EQ(std::memcmp(x_steps.data(), y_steps.data(), x_steps.size() * 4), 0);
  }
}

TEST(ForwardBitIdentity, SnapshotRestoreReplaysExactly) {
  auto m = load_k3_resident(tiny_dir(3), 1);
  const K3Config& c = m->config;
  std::vector<uint32_t> tokens = prompt_tokens(5, 10, static_cast<uint32_t>(c.vocab_size));
  K3Session s(c);
  m->model->forward(s, std::span<const uint32_t>(tokens.data(), 6), false);
  K3Session::Snapshot snap = s.snapshot();
  Rows first = m->model->forward(s, std::span<const uint32_t>(tokens.data() + 6, 4), true);
  // A different continuation, then roll back and replay the first one.
  std::vector<uint32_t> other = {1, 2, 3};
  m->model->forward(s, other, false);
  s.restore(snap);
  EXPECT_EQ(s.length(), 6);
  Rows again = m->model->forward(s, std::span<const uint32_t>(tokens.data() + 6, 4), true);
  EXPECT_EQ(std::memcmp(first.v.data(), again.v.data(), first.v.size() * 4), 0);
}

TEST(ForwardBitIdentity, EveryIsaPathGivesTheSameLogits) {
  auto m = load_k3_resident(tiny_dir(1), 1);
  const K3Config& c = m->config;
  std::vector<uint32_t> tokens = prompt_tokens(21, 7, static_cast<uint32_t>(c.vocab_size));
  const Isa best = detect_isa();
  std::vector<Isa> paths;  // scalar first
  for (Isa isa : kAllIsas)
    if (isa_supported(isa)) paths.push_back(isa);
  std::vector<std::vector<float>> results;
  for (Isa isa : paths) {
    set_active_isa(isa);
    K3Session s(c);
    results.push_back(m->model->forward(s, tokens, true).v);
  }
  set_active_isa(best);
  for (size_t i = 1; i < results.size(); ++i)
    EXPECT_EQ(std::memcmp(results[0].data(), results[i].data(), results[0].size() * 4), 0)
        << isa_name(paths[i]) << " differs from scalar";
}

// ---- several sessions in one pass (forward_batch) ---------------------------------

namespace {

// Three sessions at different lengths, each beside its copy: 0 fresh, 1 with
// a 5-token prompt, 2 mid-decode (a 4-token prompt, then 2 tokens one by one).
test::BatchBeside three_sessions(K3Model& model, uint32_t vocab) {
  test::BatchBeside b(model);
  b.add(model.new_session());
  auto prefilled = model.new_session();
  model.forward(*prefilled, prompt_tokens(31, 5, vocab), false);
  b.add(std::move(prefilled));
  auto decoding = model.new_session();
  model.forward(*decoding, prompt_tokens(32, 4, vocab), false);
  for (uint32_t t : prompt_tokens(33, 2, vocab)) model.forward(*decoding, std::span<const uint32_t>(&t, 1), false);
  b.add(std::move(decoding));
  return b;
}

void expect_same_k3_sessions(test::BatchBeside& b, const K3Config& c) {
  for (size_t i = 0; i < b.batched.size(); ++i)
    test::expect_same_state(k3_session(*b.batched[i]), k3_session(*b.solo[i]), c, "session " + std::to_string(i));
}

}  // namespace

// A decode row, a prompt with its last row's logits and a block with every
// row's, of sessions at three lengths, in one pass: each part's logits and
// the captured rows equal its solo pass's bit for bit, the sessions end in
// the same state, and the next batch (every part one decode row) and plain
// decoding after it agree too.
TEST(ForwardBatch, EachPartEqualsItsSoloPassAndTheSessionsAdvanceAlike) {
  auto m = load_k3_resident(tiny_dir(1), 2);
  K3Model& model = *m->model;
  const K3Config& c = m->config;
  const uint32_t V = static_cast<uint32_t>(c.vocab_size);
  model.set_capture_layers({1, 4, 9});
  test::BatchBeside b = three_sessions(model, V);
  const size_t captured = test::expect_batch_equals_solo(
      b, {{2, prompt_tokens(34, 1, V), false}, {0, prompt_tokens(35, 6, V), false}, {1, prompt_tokens(36, 4, V), true}});
  EXPECT_EQ(captured, 11u);
  EXPECT_EQ(model.captured().n, 3 * static_cast<size_t>(c.hidden_size));
  expect_same_k3_sessions(b, c);
  EXPECT_EQ(test::expect_batch_equals_solo(b, {{0, {7}, false}, {1, {8}, false}, {2, {9}, false}}), 3u);
  test::expect_sessions_agree(b, 10);
  expect_same_k3_sessions(b, c);
}

// Slices smaller than a part: each part's attention is cut as its solo pass
// with the same slice_rows cuts it (the MLA offsets, the KDA state carried
// from slice to slice), the experts run slice by slice over the stack.
TEST(ForwardBatch, SlicedPartsEqualTheirSlicedSoloPasses) {
  auto m = load_k3_resident(tiny_dir(1), 1);
  K3Model& model = *m->model;
  const uint32_t V = static_cast<uint32_t>(m->config.vocab_size);
  model.set_capture_layers({3});
  test::BatchBeside b = three_sessions(model, V);
  PassShape sliced;
  sliced.slice_rows = 2;
  EXPECT_EQ(test::expect_batch_equals_solo(b,
                                           {{0, prompt_tokens(37, 5, V), true},
                                            {1, prompt_tokens(38, 1, V), false},
                                            {2, prompt_tokens(39, 7, V), false}},
                                           sliced),
            13u);
  expect_same_k3_sessions(b, m->config);
  test::expect_sessions_agree(b, 11);
}

// Stopped inside the pass: an empty answer, the sessions part-way; rewound
// to their marks they run the batch again as if it had never started.
TEST(ForwardBatch, ACancelledBatchReturnsNothingAndRewindsPerSession) {
  auto m = load_k3_resident(tiny_dir(1), 1);
  K3Model& model = *m->model;
  const uint32_t V = static_cast<uint32_t>(m->config.vocab_size);
  test::BatchBeside b = three_sessions(model, V);
  std::vector<std::shared_ptr<SessionMark>> marks;
  for (auto& s : b.batched) marks.push_back(model.mark(*s));
  const std::vector<uint32_t> one = prompt_tokens(40, 1, V), many = prompt_tokens(41, 5, V);
  const std::vector<BatchPart> parts = {{b.batched[0].get(), many, true}, {b.batched[2].get(), one, false}};
  PassShape stop;
  stop.poll_interval = std::chrono::microseconds(0);
  int64_t layer_now = -1;
  stop.on_layer = [&](int64_t layer) { layer_now = layer; };
  stop.cancelled = [&] { return layer_now == 5; };
  EXPECT_TRUE(model.forward_batch(parts, stop).empty());
  EXPECT_EQ(layer_now, 5);
  for (size_t i = 0; i < marks.size(); ++i) model.rewind(*b.batched[i], *marks[i]);
  test::expect_batch_equals_solo(b, {{0, many, true}, {2, one, false}});
  expect_same_k3_sessions(b, m->config);
}

TEST(ForwardBatch, RefusesBadPartsBeforeAnySessionChanges) {
  auto m = load_k3_resident(tiny_dir(1), 1);
  K3Model& model = *m->model;
  const uint32_t V = static_cast<uint32_t>(m->config.vocab_size);
  auto a = model.new_session(), b = model.new_session();
  model.forward(*a, prompt_tokens(42, 3, V), false);
  const std::vector<uint32_t> ok = {1, 2}, bad = {3, V}, none;
  EXPECT_FAILS_WITH(model.forward_batch({}), "forward_batch: no parts");
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {a.get(), ok}}), "parts 0 and 1 share a session");
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {b.get(), bad}}), "batch part 1",
                    "token id 768 outside the vocabulary of 768");
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {b.get(), none}}), "batch part 1", "no tokens");
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {nullptr, ok}}), "part 1 has no session");
  KdaLog log;
  model.set_kda_log(&log);
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {b.get(), ok}}), "KDA step log",
                    "not a batch of 2");
  model.set_kda_log(nullptr);
  EXPECT_EQ(a->length(), 3);
  EXPECT_EQ(b->length(), 0);
}

// Verification state is each session's: A verifies, B verifies, then A and
// B keep part of their passes (and again the other way round): every
// session ends exactly as verifying and keeping alone leaves its copy.
TEST(ForwardBatch, InterleavedVerificationsKeepWhatEachAloneKeeps) {
  auto m = load_k3_resident(tiny_dir(2), 1);
  K3Model& model = *m->model;
  const uint32_t V = static_cast<uint32_t>(m->config.vocab_size);
  test::BatchBeside b(model);
  for (uint64_t seed : {43, 44}) {
    auto s = model.new_session();
    model.forward(*s, prompt_tokens(seed, 4 + seed % 3, V), false);
    b.add(std::move(s));
  }
  const std::vector<uint32_t> draft_a = prompt_tokens(45, 4, V), draft_b = prompt_tokens(46, 5, V);
  for (bool a_first : {true, false}) {
    SCOPED_TRACE(a_first ? "A kept first" : "B kept first");
    const Rows la = model.forward_verify(*b.batched[0], draft_a);
    const Rows lb = model.forward_verify(*b.batched[1], draft_b);
    if (a_first) {
      model.keep_verified(*b.batched[0], 2);
      model.keep_verified(*b.batched[1], 3);
    } else {
      model.keep_verified(*b.batched[1], 5);
      model.keep_verified(*b.batched[0], 1);
    }
    const Rows la_alone = model.forward_verify(*b.solo[0], draft_a);
    model.keep_verified(*b.solo[0], a_first ? 2 : 1);
    const Rows lb_alone = model.forward_verify(*b.solo[1], draft_b);
    model.keep_verified(*b.solo[1], a_first ? 3 : 5);
    EXPECT_TRUE(test::same_bits(la, la_alone));
    EXPECT_TRUE(test::same_bits(lb, lb_alone));
    expect_same_k3_sessions(b, m->config);
    test::expect_sessions_agree(b, 12);
  }
  // Each pass is kept once, and only on its own session.
  model.forward_verify(*b.batched[0], draft_a);
  EXPECT_FAILS_WITH(model.keep_verified(*b.batched[1], 1), "verifier", "cannot commit 1 rows of a 0-row pass");
  EXPECT_FAILS_WITH(model.keep_verified(*b.batched[0], 5), "verifier", "cannot commit 5 rows of a 4-row pass");
  model.keep_verified(*b.batched[0], 4);
  EXPECT_FAILS_WITH(model.keep_verified(*b.batched[0], 1), "verifier", "of a 0-row pass");
}
