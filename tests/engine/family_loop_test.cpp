// The generation loop and speculation through the family interface
// (model/common/causal_model.h), for every target family: the loop with
// drafts right and wrong (and with the n-gram drafter) emits plain greedy decoding's tokens with the same logits
// rows; prefill in chunks and groups changes nothing; a verification pass
// committed at any prefix equals decoding that prefix one position at a
// time; a stop before the prefill leaves the session empty; marks rewind.
// The reference is the model's forward() one position at a time.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "model/kimi_k3/load/loaded_k3.h"
#include "model/qwen3_moe/load/loaded_qwen3_moe.h"
#include "engine/prefill.h"
#include "model/common/greedy.h"
#include "model/kimi_k3/generator.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "model/qwen3_moe/qwen3_moe_model.h"
#include "speculative/ngram_drafter.h"
#include "engine/speculative_generate.h"
#include "speculative/verifier.h"
#include "support/test_support.h"
#include "util/error.h"

namespace deltafin {
namespace {

// A loaded target of either family behind the interface.
struct Target {
  test::TempDir dir;
  std::unique_ptr<LoadedK3> k3;
  // Qwen3-MoE, resident.
  Qwen3MoeConfig qc;
  Checkpoint ck;
  Qwen3MoeWeights qw;
  std::unique_ptr<ResidentExpertSource> qe;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Qwen3MoeModel> qm;
  CausalModel* model = nullptr;
  uint32_t vocab() const { return static_cast<uint32_t>(model->summary().vocab); }
};

std::unique_ptr<Target> make_target(const std::string& family) {
  auto t = std::make_unique<Target>();
  const std::string ckpt = t->dir.path() + "/ckpt";
  if (family == "kimi_k3") {
    GenerateOptions o;
    o.out_dir = ckpt;
    o.seed = 31;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
    t->k3 = load_k3_resident(ckpt, 2);
    t->model = t->k3->model.get();
  } else {
    Qwen3MoeGenerateOptions o;
    o.out_dir = ckpt;
    o.seed = 31;
    o.dims = qwen3_moe_preset("tiny");
    o.dims.layers = 3, o.dims.mlp_only_layers = {0};
    generate_qwen3_moe_checkpoint(o);
    t->qc = read_qwen3_moe_config(ckpt + "/config.json");
    t->ck = Checkpoint::open(ckpt);
    t->qw = load_qwen3_moe_weights(t->qc, t->ck);
    t->qe = load_resident_qwen3_moe_experts(t->qc, t->ck);
    t->pool = std::make_unique<ThreadPool>(2);
    t->qm = std::make_unique<Qwen3MoeModel>(t->qc, t->qw, *t->qe, t->pool.get());
    t->model = t->qm.get();
  }
  EXPECT_EQ(t->model->summary().family, family);
  return t;
}

bool same_rows(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

class FamilyLoop : public ::testing::TestWithParam<std::string> {};

// Proposes the true continuation (the recorded stream) with every third
// proposal made wrong, so rounds accept every prefix length from none to all.
class ErringDrafter : public Drafter {
public:
  ErringDrafter(std::vector<uint32_t> stream, uint32_t vocab) : stream_(std::move(stream)), vocab_(vocab) {}
  std::string name() const override { return "erring"; }
  std::vector<uint32_t> propose(std::span<const uint32_t> history, int k) override {
    std::vector<uint32_t> out;
    for (size_t i = history.size(); i < stream_.size() && out.size() < static_cast<size_t>(k); ++i)
      out.push_back(++calls_ % 3 == 0 ? (stream_[i] + 1) % vocab_ : stream_[i]);
    return out;
  }

private:
  std::vector<uint32_t> stream_;
  uint32_t vocab_;
  uint64_t calls_ = 0;
};

// A prompt that repeats itself, so the n-gram drafter (k = 0, adapting) may
// propose too.
std::vector<uint32_t> repetitive_prompt(uint32_t vocab) {
  std::vector<uint32_t> base = test::random_tokens(5, 7, vocab), p;
  for (int r = 0; r < 3; ++r) p.insert(p.end(), base.begin(), base.end());
  return p;
}

TEST_P(FamilyLoop, SpeculationEmitsPlainDecodingsTokensAndLogits) {
  auto t = make_target(GetParam());
  CausalModel& m = *t->model;
  const std::vector<uint32_t> prompt = repetitive_prompt(t->vocab());
  const int64_t n = 24;

  // Plain greedy by hand.
  std::vector<uint32_t> want;
  std::vector<std::vector<float>> want_rows;
  auto ref = m.new_session();
  Rows l = m.forward(*ref, prompt, false);
  for (int64_t i = 0; i < n; ++i) {
    want_rows.emplace_back(l.row(0), l.row(0) + l.n);
    want.push_back(argmax_first(l.row(0), l.n));
    if (i + 1 < n) l = m.forward(*ref, std::span<const uint32_t>(&want.back(), 1), false);
  }

  std::vector<uint32_t> stream = prompt;
  stream.insert(stream.end(), want.begin(), want.end());
  for (int k : {0, 2, 7}) {  // 0: the controller adapts
    SCOPED_TRACE("k " + std::to_string(k));
    ErringDrafter erring(stream, t->vocab());
    NgramDrafter ngram;
    Drafter& drafter = k == 0 ? static_cast<Drafter&>(ngram) : erring;
    SpecParams sp;
    sp.drafter = &drafter;
    sp.fixed_k = k;
    SpecStats stats;
    GenerateParams p;
    p.max_new = n;
    p.ignore_eos = true;
    p.prefill_chunk = 5;  // slices (where the family slices) and groups change nothing
    p.prefill_group = 10;
    auto s = m.new_session();
    std::vector<uint32_t> got;
    std::vector<std::vector<float>> got_rows;
    generate_speculative(m, *s, prompt, p, sp, &stats, [&](uint32_t id) { got.push_back(id); },
                         [&](const float* row, size_t V) { got_rows.emplace_back(row, row + V); });
    EXPECT_EQ(got, want);
    ASSERT_EQ(got_rows.size(), want_rows.size());
    for (size_t i = 0; i < got_rows.size(); ++i) EXPECT_EQ(got_rows[i], want_rows[i]) << "token " << i;
    if (k > 0) {
      EXPECT_GT(stats.rounds, 0) << "no verification round: the test would not exercise verification";
      EXPECT_GT(stats.accepted, 0);
      EXPECT_LT(stats.accepted, stats.drafted);
    }
    // Same end state: the next step's logits agree (the reference steps and rewinds).
    EXPECT_EQ(s->length(), ref->length());
    const uint32_t next[1] = {3};
    auto before = m.mark(*ref);
    Rows a = m.forward(*s, next, false);
    Rows b = m.forward(*ref, next, false);
    m.rewind(*ref, *before);
    EXPECT_TRUE(same_rows(a.v.data(), b.v.data(), a.v.size()));
  }
}

TEST_P(FamilyLoop, CommittingAnyPrefixEqualsDecodingJustThatPrefix) {
  auto t = make_target(GetParam());
  CausalModel& m = *t->model;
  const std::vector<uint32_t> prompt = test::random_tokens(32, 9, t->vocab());
  const std::vector<uint32_t> block = test::random_tokens(33, 6, t->vocab());
  for (size_t rows = 1; rows <= block.size(); ++rows) {
    SCOPED_TRACE("commit " + std::to_string(rows));
    auto s = m.new_session();
    m.forward(*s, prompt, false);
    Verifier v(m);
    Verification ver = v.run(*s, block[0], std::span<const uint32_t>(block).subspan(1));
    v.commit(*s, rows);
    auto ref = m.new_session();
    m.forward(*ref, prompt, false);
    for (size_t i = 0; i < rows; ++i) {
      Rows one = m.forward(*ref, std::span<const uint32_t>(&block[i], 1), false);
      EXPECT_TRUE(same_rows(one.row(0), ver.logits.row(i), one.n)) << "row " << i;
    }
    EXPECT_EQ(s->length(), ref->length());
    const uint32_t next[1] = {7};
    Rows a = m.forward(*s, next, false), b = m.forward(*ref, next, false);
    EXPECT_TRUE(same_rows(a.v.data(), b.v.data(), a.v.size()));
    // A kept pass is kept once, and only on its own session.
    EXPECT_THROW(v.commit(*s, 1), Error);
  }
  auto s = m.new_session(), other = m.new_session();
  m.forward(*s, prompt, false);
  m.forward(*other, prompt, false);
  m.forward_verify(*s, block);
  EXPECT_THROW(m.keep_verified(*other, 2), Error);
}

TEST_P(FamilyLoop, MarkRewindsAndAStopBeforeThePrefillLeavesTheSessionEmpty) {
  auto t = make_target(GetParam());
  CausalModel& m = *t->model;
  const std::vector<uint32_t> prompt = test::random_tokens(8, 12, t->vocab());
  auto s = m.new_session();
  m.forward(*s, std::span<const uint32_t>(prompt).first(6), false);
  auto mark = m.mark(*s);
  Rows first = m.forward(*s, std::span<const uint32_t>(prompt).subspan(6), false);
  m.rewind(*s, *mark);
  EXPECT_EQ(s->length(), 6);
  Rows again = m.forward(*s, std::span<const uint32_t>(prompt).subspan(6), false);
  EXPECT_TRUE(same_rows(first.v.data(), again.v.data(), first.v.size()));

  std::atomic<bool> stop{true};
  GenerateParams p;
  p.max_new = 4;
  p.stop = &stop;
  auto c = m.new_session();
  std::vector<uint32_t> none;
  GenerateStats st = generate_speculative(m, *c, prompt, p, SpecParams{}, nullptr, [&](uint32_t id) { none.push_back(id); });
  EXPECT_EQ(st.reason, StopReason::Interrupted);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(c->length(), 0);

  // A stop seen at the second layer of the first group rewinds that group.
  int asked = 0;
  auto d = m.new_session();
  Rows r = prefill(m, *d, prompt, 0, nullptr, [&] { return ++asked > 2; });
  EXPECT_EQ(r.T, 0u);
  EXPECT_EQ(d->length(), 0);
}

TEST_P(FamilyLoop, SummaryDescribesTheSession) {
  auto t = make_target(GetParam());
  const ModelSummary& s = t->model->summary();
  EXPECT_GT(s.session_bytes_per_position, 0u);
  EXPECT_GT(s.pass_row_bytes, 0u);
  EXPECT_FALSE(s.moe_layers.empty());
  auto session = t->model->new_session();
  const std::vector<uint32_t> prompt = test::random_tokens(9, 10, t->vocab());
  t->model->forward(*session, prompt, false);
  EXPECT_EQ(session->bytes(), s.session_fixed_bytes + 10 * s.session_bytes_per_position);
}

// Counts the passes a model begins and ends over it, and fails every read of
// one layer's experts as a drive error would (a real source throws from get()
// or for_each_ready_group the same way).
class FailingSource : public ExpertSource {
public:
  FailingSource(ExpertSource& inner, int64_t failing_layer) : inner_(inner), failing_layer_(failing_layer) {}
  ExpertHandle get(int64_t layer, int64_t expert) override {
    if (layer == failing_layer_) fail("test source: reading layer ", layer, " expert ", expert, " failed");
    return inner_.get(layer, expert);
  }
  void begin_pass(size_t positions) override { begun.push_back(positions); }
  void end_pass() override { ++ended; }
  std::vector<size_t> begun;
  int ended = 0;

private:
  ExpertSource& inner_;
  int64_t failing_layer_;
};

// The target's model again, over `experts`.
std::unique_ptr<CausalModel> model_over(Target& t, ExpertSource& experts) {
  if (t.k3) return std::make_unique<K3Model>(t.k3->config, t.k3->weights, experts, nullptr);
  return std::make_unique<Qwen3MoeModel>(t.qc, t.qw, experts, nullptr);
}

ExpertSource& experts_of(Target& t) { return t.k3 ? *t.k3->experts : *t.qe; }

// A pass ends at the source however it ends: after its layers, and when an
// expert read fails part-way (the source must drop the pass's unused
// prefetches and decay its heat then too).
TEST_P(FamilyLoop, EveryPassEndsAtTheSourceEvenWhenAnExpertReadFails) {
  auto t = make_target(GetParam());
  const std::vector<uint32_t> prompt = test::random_tokens(9, 5, t->vocab());

  FailingSource fine(experts_of(*t), -1);
  std::unique_ptr<CausalModel> ok = model_over(*t, fine);
  auto s1 = ok->new_session();
  ok->forward(*s1, prompt, false);
  EXPECT_EQ(fine.begun, std::vector<size_t>{5});
  EXPECT_EQ(fine.ended, 1);

  FailingSource failing(experts_of(*t), t->model->summary().moe_layers.back());
  std::unique_ptr<CausalModel> broken = model_over(*t, failing);
  auto s2 = broken->new_session();
  try {
    broken->forward(*s2, prompt, false);
    ADD_FAILURE() << "the failed expert read did not stop the pass";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test source: reading layer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(failing.begun, std::vector<size_t>{5});
  EXPECT_EQ(failing.ended, 1) << "the pass the read error stopped never ended at the source";
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyLoop, ::testing::Values("kimi_k3", "qwen3_moe"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace deltafin
