// Speculative decoding never changes the output (k3-model.md §10.1): for
// drafts that are always right, always wrong or right at random, and for
// every draft length, the emitted tokens, the logits behind each of them and
// the session state at the end equal plain one-token-at-a-time decoding, bit
// for bit. The reference here is the model's own forward() called one
// position at a time, not generate().
#include <gtest/gtest.h>

#include <algorithm>

#include <cstring>
#include <filesystem>
#include <set>

#include "model/kimi_k3/load/loaded_k3.h"
#include "engine/stats_collector.h"
#include "model/kimi_k3/generator.h"
#include "speculative/ngram_drafter.h"
#include "engine/speculative_generate.h"
#include "speculative/verifier.h"
#include "store/setup.h"
#include "speculative/plain_decode.h"
#include "support/session_compare.h"
#include "support/test_support.h"
#include "util/rng.h"

using namespace deltafin;
using test::decode_plain;
using test::expect_same_state;
using test::PlainRun;
using test::same_bits;

namespace {

struct Tiny {
  test::TempDir root;
  std::string dir;
  Tiny() {
    dir = root.path() + "/ckpt";
    GenerateOptions o;
    o.out_dir = dir;
    o.seed = 21;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
  }
  std::string store() {
    const std::string s = root.path() + "/store";
    if (std::filesystem::exists(s)) return s;
    SetupOptions so;
    so.from = dir;
    so.store = s;
    for (int d = 0; d < 2; ++d) {
      so.drives.push_back(root.path() + "/drive" + std::to_string(d));
      std::filesystem::create_directories(so.drives.back());
      so.drive_mbps.push_back(1000.0);
    }
    so.spine = "bf16";
    so.quiet = true;
    run_setup(so);
    return s;
  }
};

Tiny& tiny() {
  static Tiny t;
  return t;
}

LoadedK3& resident() {
  static std::unique_ptr<LoadedK3> m = load_k3_resident(tiny().dir, 2);
  return *m;
}

// Drafts from the known right continuation: all right, all wrong (right + 1)
// or each right with probability one half.
class ScriptedDrafter : public Drafter {
public:
  enum Mode { Right, Wrong, Random };
  ScriptedDrafter(std::vector<uint32_t> expected, Mode mode, uint32_t vocab)
      : expected_(std::move(expected)), mode_(mode), vocab_(vocab), rng_(99) {}
  std::string name() const override { return "scripted"; }
  std::vector<uint32_t> propose(std::span<const uint32_t> history, int k) override {
    std::vector<uint32_t> out;
    for (int i = 0; i < k; ++i) {
      const size_t at = history.size() + static_cast<size_t>(i);
      const uint32_t right = at < expected_.size() ? expected_[at] : 0;
      const uint32_t wrong = (right + 1) % vocab_;
      if (mode_ == Right) out.push_back(right);
      else if (mode_ == Wrong) out.push_back(wrong);
      else out.push_back(rng_.next() % 2 ? right : wrong);
    }
    return out;
  }

private:
  std::vector<uint32_t> expected_;
  Mode mode_;
  uint32_t vocab_;
  Rng rng_;
};

const char* mode_name(ScriptedDrafter::Mode m) {
  return m == ScriptedDrafter::Right ? "right" : m == ScriptedDrafter::Wrong ? "wrong" : "random";
}

}  // namespace

TEST(Speculative, EveryDraftKindAndLengthEmitsPlainDecodingsTokensLogitsAndState) {
  LoadedK3& m = resident();
  const uint32_t V = static_cast<uint32_t>(m.config.vocab_size);
  const std::vector<uint32_t> prompt = test::random_tokens(31, 12, V - 256);
  const int64_t n = 48;
  PlainRun plain = decode_plain(*m.model, prompt, n);
  std::vector<uint32_t> expected = prompt;
  expected.insert(expected.end(), plain.tokens.begin(), plain.tokens.end());

  for (auto mode : {ScriptedDrafter::Right, ScriptedDrafter::Wrong, ScriptedDrafter::Random}) {
    for (int k : {1, 2, 3, 7, 0}) {
      const std::string what = std::string(mode_name(mode)) + " drafts, k " + (k ? std::to_string(k) : "adaptive");
      SCOPED_TRACE(what);
      ScriptedDrafter drafter(expected, mode, V);
      SpecParams sp;
      sp.drafter = &drafter;
      sp.fixed_k = k;
      GenerateParams gp;
      gp.max_new = n;
      gp.ignore_eos = true;
      K3Session s(m.config);
      SpecStats ss;
      std::vector<uint32_t> got;
      std::vector<std::vector<float>> rows;
      GenerateStats st = generate_speculative(
          *m.model, s, prompt, gp, sp, &ss, [&](uint32_t t) { got.push_back(t); },
          [&](const float* l, size_t nv) { rows.emplace_back(l, l + nv); });
      EXPECT_EQ(st.reason, StopReason::MaxNew);
      ASSERT_EQ(got, plain.tokens);
      ASSERT_EQ(rows.size(), plain.logits.size());
      for (size_t i = 0; i < rows.size(); ++i) EXPECT_TRUE(same_bits(rows[i], plain.logits[i])) << "token " << i;
      expect_same_state(s, plain.session, m.config, what);
      // The drafts really were verified: right ones accepted, wrong ones not.
      EXPECT_GT(ss.rounds, 0);
      if (mode == ScriptedDrafter::Right) {
        EXPECT_EQ(ss.accepted, ss.drafted);
      }
      if (mode == ScriptedDrafter::Wrong) {
        EXPECT_EQ(ss.accepted, 0);
      }
      if (mode == ScriptedDrafter::Random && k == 7) {
        EXPECT_GT(ss.accepted, 0);
        EXPECT_LT(ss.accepted, ss.drafted);
      }
      EXPECT_EQ(ss.plain_steps + ss.round_tokens, n - 1);  // every token after the prefill's
    }
  }
}

TEST(Speculative, CommittingAnyPrefixEqualsDecodingJustThatPrefix) {
  LoadedK3& m = resident();
  const uint32_t V = static_cast<uint32_t>(m.config.vocab_size);
  const std::vector<uint32_t> prompt = test::random_tokens(32, 9, V);
  const std::vector<uint32_t> block = test::random_tokens(33, 6, V);  // [last, d1..d5], arbitrary ids
  K3Session start(m.config);
  m.model->forward(start, prompt, false);

  for (size_t rows = 1; rows <= block.size(); ++rows) {
    SCOPED_TRACE("commit " + std::to_string(rows));
    K3Session s = start;
    Verifier v(*m.model);
    Verification ver = v.run(s, block[0], std::span<const uint32_t>(block).subspan(1));
    EXPECT_EQ(s.length(), start.length() + static_cast<int64_t>(block.size()));
    ASSERT_EQ(ver.greedy.size(), block.size());
    v.commit(s, rows);

    K3Session ref = start;
    for (size_t i = 0; i < rows; ++i) {
      const uint32_t one[1] = {block[i]};
      Rows l = m.model->forward(ref, one, false);
      // Each verification row's logits equal the single step's.
      EXPECT_EQ(0, std::memcmp(l.row(0), ver.logits.row(i), l.n * sizeof(float))) << "row " << i;
      EXPECT_EQ(ver.greedy[i], argmax_first(l.row(0), l.n));
    }
    expect_same_state(s, ref, m.config, "commit " + std::to_string(rows));
    // And decoding continues identically from the committed state.
    const uint32_t next[1] = {7};
    Rows a = m.model->forward(s, next, false), b = m.model->forward(ref, next, false);
    EXPECT_TRUE(same_bits(a.v, b.v));
  }
  K3Session s = start;
  Verifier v(*m.model);
  v.run(s, block[0], std::span<const uint32_t>(block).subspan(1));
  EXPECT_FAILS_WITH(v.commit(s, 0), "cannot commit 0 rows of a 6-row pass");
  EXPECT_FAILS_WITH(v.commit(s, 7), "cannot commit 7 rows of a 6-row pass");
}

TEST(Speculative, StopRulesEndWhereThePlainLoopEnds) {
  LoadedK3& m = resident();
  const uint32_t V = static_cast<uint32_t>(m.config.vocab_size);
  const std::vector<uint32_t> prompt = test::random_tokens(34, 10, V - 256);
  PlainRun plain = decode_plain(*m.model, prompt, 30);
  std::vector<uint32_t> expected = prompt;
  expected.insert(expected.end(), plain.tokens.begin(), plain.tokens.end());

  // An "end of message" inside an accepted draft: plain generate() stops at
  // its first occurrence; so must speculation, with the same session length.
  // Two end tokens (a Qwen3 chat has <|im_end|> and <|endoftext|>): the
  // run ends at the first token that is either.
  const size_t stop_at = 13;
  GenerateParams gp;
  gp.max_new = 30;
  gp.eos = {V - 1, plain.tokens[stop_at]};
  size_t first_end = 0;
  while (std::find(gp.eos.begin(), gp.eos.end(), plain.tokens[first_end]) == gp.eos.end()) ++first_end;
  std::vector<uint32_t> want;
  K3Session ws(m.config);
  GenerateStats wst = generate_speculative(*m.model, ws, prompt, gp, SpecParams{}, nullptr, [&](uint32_t t) { want.push_back(t); });
  ASSERT_EQ(wst.reason, StopReason::Eos);
  EXPECT_EQ(want, std::vector<uint32_t>(plain.tokens.begin(), plain.tokens.begin() + first_end + 1));

  for (int k : {1, 4, 7}) {
    SCOPED_TRACE("k " + std::to_string(k));
    ScriptedDrafter drafter(expected, ScriptedDrafter::Right, V);
    SpecParams sp;
    sp.drafter = &drafter;
    sp.fixed_k = k;
    K3Session s(m.config);
    std::vector<uint32_t> got;
    GenerateStats st = generate_speculative(*m.model, s, prompt, gp, sp, nullptr, [&](uint32_t t) { got.push_back(t); });
    EXPECT_EQ(st.reason, StopReason::Eos);
    EXPECT_EQ(got, want);
    expect_same_state(s, ws, m.config, "eos");
  }

  // max-new in the middle of a round and a context limit: same tokens, same end state.
  for (auto [max_new, limit] : {std::pair<int64_t, int64_t>{11, 0}, {30, 25}}) {
    GenerateParams p2;
    p2.max_new = max_new;
    p2.ignore_eos = true;
    p2.context_limit = limit;
    std::vector<uint32_t> w2;
    K3Session s1(m.config), s2(m.config);
    GenerateStats a = generate_speculative(*m.model, s1, prompt, p2, SpecParams{}, nullptr, [&](uint32_t t) { w2.push_back(t); });
    ScriptedDrafter drafter(expected, ScriptedDrafter::Right, V);
    SpecParams sp;
    sp.drafter = &drafter;
    sp.fixed_k = 7;
    std::vector<uint32_t> g2;
    GenerateStats b = generate_speculative(*m.model, s2, prompt, p2, sp, nullptr, [&](uint32_t t) { g2.push_back(t); });
    EXPECT_EQ(a.reason, b.reason);
    EXPECT_EQ(g2, w2);
    expect_same_state(s2, s1, m.config, "max-new " + std::to_string(max_new));
  }
}

TEST(Speculative, NgramDraftingKeepsTheOutput) {
  LoadedK3& m = resident();
  const uint32_t V = static_cast<uint32_t>(m.config.vocab_size);
  std::vector<uint32_t> unit = test::random_tokens(35, 8, V - 256), prompt;
  for (int i = 0; i < 4; ++i) prompt.insert(prompt.end(), unit.begin(), unit.end());
  PlainRun plain = decode_plain(*m.model, prompt, 40);
  NgramDrafter drafter;
  SpecParams sp;
  sp.drafter = &drafter;
  GenerateParams gp;
  gp.max_new = 40;
  gp.ignore_eos = true;
  K3Session s(m.config);
  SpecStats ss;
  std::vector<uint32_t> got;
  generate_speculative(*m.model, s, prompt, gp, sp, &ss, [&](uint32_t t) { got.push_back(t); });
  EXPECT_EQ(got, plain.tokens);
  expect_same_state(s, plain.session, m.config, "ngram");
  // Random weights rarely repeat themselves, so most steps find no match and
  // run plain; whatever was drafted was verified, and every token is counted once.
  EXPECT_EQ(ss.plain_steps + ss.round_tokens, 39);
}

TEST(Speculative, AStreamedVerificationReadsItsUnionOnceAndMatchesResident) {
  // Cache of the working set only and no lookahead: what a pass reads is
  // exactly what it demands, so bytes read == the union of its positions'
  // (layer, expert) pairs, counted independently from the routes.
  EngineOptions o;
  o.cache_gb = 0;
  o.lookahead = LookaheadMode::Off;
  o.save_heat = false;
  auto m = load_k3_store(tiny().store(), o);
  LoadedK3& r = resident();
  const uint32_t V = static_cast<uint32_t>(m->config.vocab_size);
  const std::vector<uint32_t> prompt = test::random_tokens(36, 10, V - 256);
  PlainRun plain = decode_plain(*r.model, prompt, 20);
  std::vector<uint32_t> expected = prompt;
  expected.insert(expected.end(), plain.tokens.begin(), plain.tokens.end());

  struct UnionCheck : StepObserver {
    RunStatsCollector stats;
    LoadedK3& m;
    std::vector<std::pair<uint64_t, uint64_t>> read_vs_union;  // decode steps only
    explicit UnionCheck(LoadedK3& lm) : stats(lm), m(lm) {}
    void step_begin(bool prefill) override { stats.step_begin(prefill); }
    void step_end(bool prefill) override {
      stats.step_end(prefill);
      if (prefill) return;
      std::set<std::pair<size_t, int64_t>> pairs;
      const auto& routes = m.model->last_routes();
      for (size_t l = 0; l < routes.size(); ++l)
        for (const Route& rt : routes[l])
          for (int64_t e : rt.experts) pairs.insert({l, e});
      read_vs_union.push_back({stats.steps().back().bytes_read, pairs.size() * m.manifest->expert_bytes});
    }
  } check(*m);

  ScriptedDrafter drafter(expected, ScriptedDrafter::Random, V);
  SpecParams sp;
  sp.drafter = &drafter;
  sp.fixed_k = 4;
  GenerateParams gp;
  gp.max_new = 20;
  gp.ignore_eos = true;
  gp.observer = &check;
  K3Session s(m->config);
  std::vector<uint32_t> got;
  generate_speculative(*m->model, s, prompt, gp, sp, nullptr, [&](uint32_t t) { got.push_back(t); });
  EXPECT_EQ(got, plain.tokens);
  expect_same_state(s, plain.session, m->config, "streamed");
  ASSERT_FALSE(check.read_vs_union.empty());
  bool some_wide = false;
  for (size_t i = 0; i < check.read_vs_union.size(); ++i) {
    EXPECT_EQ(check.read_vs_union[i].first, check.read_vs_union[i].second) << "step " << i;
    some_wide = some_wide || check.stats.steps()[i + 1].positions > 1;
  }
  EXPECT_TRUE(some_wide);
}

TEST(Speculative, ALongGenerationWithRandomDraftsStaysIdentical) {
  // 300 tokens: many rounds of partial acceptance and rollback in a row, the
  // controller changing k as it goes; every token and the end state as plain.
  LoadedK3& m = resident();
  const uint32_t V = static_cast<uint32_t>(m.config.vocab_size);
  const std::vector<uint32_t> prompt = test::random_tokens(37, 20, V - 256);
  const int64_t n = 300;
  PlainRun plain = decode_plain(*m.model, prompt, n);
  std::vector<uint32_t> expected = prompt;
  expected.insert(expected.end(), plain.tokens.begin(), plain.tokens.end());
  for (int k : {0, 5}) {
    SCOPED_TRACE("k " + std::to_string(k));
    ScriptedDrafter drafter(expected, ScriptedDrafter::Random, V);
    SpecParams sp;
    sp.drafter = &drafter;
    sp.fixed_k = k;
    GenerateParams gp;
    gp.max_new = n;
    gp.ignore_eos = true;
    K3Session s(m.config);
    SpecStats ss;
    std::vector<uint32_t> got;
    generate_speculative(*m.model, s, prompt, gp, sp, &ss, [&](uint32_t t) { got.push_back(t); });
    EXPECT_EQ(got, plain.tokens);
    expect_same_state(s, plain.session, m.config, "long");
    EXPECT_GT(ss.rounds, 0);
  }
}
