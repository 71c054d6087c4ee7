// The drafters that need their own models, end to end on the tiny K3 target:
// DSpark (context captured from the target during prefill and every
// verification) and a Qwen3 draft model with its own tokenizer (drafts go
// through text). Whatever they propose, speculative decoding emits plain
// decoding's tokens and ends in plain decoding's state; and a DSpark drafter
// driven by the loop proposes exactly what a DSpark model fed the same target
// rows by hand proposes.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/kimi_k3/load/loaded_k3.h"
#include "model/kimi_k3/generator.h"
#include "model/qwen3/qwen3_generator.h"
#include "model/loaders/drafter_factory.h"
#include "model/k3_dspark/drafter/dspark_drafter.h"
#include "model/k3_dspark/generator.h"
#include "model/qwen3/drafter/model_drafter.h"
#include "engine/speculative_generate.h"
#include "speculative/plain_decode.h"
#include "support/family_model.h"
#include "support/session_compare.h"
#include "support/test_support.h"

using namespace deltafin;

namespace {
// A factory for `--draft text`, with auto's directories.
DrafterFactory factory(const std::string& text, LoadedModel& target, const std::string& head_dir = "",
                       const std::string& model_dir = "") {
  DraftSpec spec = parse_draft_spec(text);
  if (!head_dir.empty()) spec.head_dir = head_dir;
  if (!model_dir.empty()) spec.model_dir = model_dir;
  return DrafterFactory(spec, target);
}
}  // namespace

namespace {

struct Models {
  test::TempDir root;
  std::string k3, dspark, qwen;
  std::unique_ptr<LoadedK3> target;
  Models() {
    k3 = root.path() + "/k3";
    dspark = root.path() + "/dspark";
    qwen = root.path() + "/qwen3";
    GenerateOptions o;
    o.out_dir = k3;
    o.seed = 23;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
    generate_dspark_checkpoint(k3, dspark, 5);
    Qwen3GenerateOptions q;
    q.out_dir = qwen;
    q.seed = 6;
    generate_qwen3_checkpoint(q);
    target = load_k3_resident(k3, 2);
  }
};

Models& models() {
  static Models m;
  return m;
}

// Runs speculative generation with `drafter`, checks it against plain decoding, returns its stats.
SpecStats expect_plain_output(Drafter& drafter, const std::vector<uint32_t>& prompt, int64_t n, int fixed_k) {
  LoadedK3& m = *models().target;
  test::PlainRun plain = test::decode_plain(*m.model, prompt, n);
  SpecParams sp;
  sp.drafter = &drafter;
  sp.fixed_k = fixed_k;
  GenerateParams gp;
  gp.max_new = n;
  gp.ignore_eos = true;
  gp.prefill_chunk = 5;  // several prefill passes: DSpark's context comes from each
  K3Session s(m.config);
  SpecStats ss;
  std::vector<uint32_t> got;
  generate_speculative(*m.model, s, prompt, gp, sp, &ss, [&](uint32_t t) { got.push_back(t); });
  m.model->set_capture_layers({});
  EXPECT_EQ(got, plain.tokens);
  test::expect_same_state(s, plain.session, m.config, drafter.name());
  return ss;
}

}  // namespace

TEST(DSparkDrafter, SpeculationWithDSparkKeepsPlainOutput) {
  Models& ms = models();
  const std::vector<uint32_t> prompt = test::random_tokens(51, 13, 500);
  for (int k : {3, 7}) {
    SCOPED_TRACE("k " + std::to_string(k));
    DSparkDrafter d(DSparkAssets::load(ms.dspark, *ms.target));
    SpecStats ss = expect_plain_output(d, prompt, 24, k);
    EXPECT_GT(ss.rounds, 0);  // DSpark always has a proposal while in step with the target
    EXPECT_LE(ss.plain_steps, 1);  // only where the token budget leaves nothing to draft
  }
}

TEST(DSparkDrafter, ProposesWhatADSparkModelFedTheSameRowsProposes) {
  Models& ms = models();
  LoadedK3& m = *ms.target;
  auto assets = DSparkAssets::load(ms.dspark, m);
  const std::vector<uint32_t> prompt = test::random_tokens(52, 11, 500);

  // The drafter after a prefill in two passes (6 + 5 rows) ...
  DSparkDrafter d(assets);
  m.model->set_capture_layers(d.capture_layers());
  K3Session s(m.config);
  Rows first = m.model->forward(s, std::span<const uint32_t>(prompt).first(6), false);
  d.committed(m.model->captured(), 6);
  Rows last = m.model->forward(s, std::span<const uint32_t>(prompt).subspan(6), false);
  d.committed(m.model->captured(), 5);
  std::vector<uint32_t> history = prompt;
  history.push_back(argmax_first(last.row(0), last.n));
  const std::vector<uint32_t> got = d.propose(history, 5);

  // ... against a DSpark model given the rows of one 11-row pass by hand.
  K3Session s2(m.config);
  m.model->forward(s2, prompt, false);
  DSparkModel ref(assets->config, assets->weights, m.weights, nullptr);
  ref.append_context(m.model->captured(), 11);
  m.model->set_capture_layers({});
  EXPECT_EQ(got, ref.propose(history.back(), 5).tokens);
  EXPECT_EQ(got.size(), 5u);

  // Out of step with the target (a history longer than its context): nothing.
  history.push_back(got[0]);
  EXPECT_TRUE(d.propose(history, 5).empty());
}

TEST(ModelDrafter, SpeculationWithAQwen3DraftModelKeepsPlainOutput) {
  Models& ms = models();
  auto assets = DraftModelAssets::load(ms.qwen, *ms.target->text, nullptr);
  const std::vector<uint32_t> prompt = ms.target->tokenizer->encode_ordinary("the quick brown fox jumps over the lazy dog");
  ModelDrafter d(assets);
  SpecStats ss = expect_plain_output(d, prompt, 24, 4);
  // Random weights on both sides: the drafts are proposed (through text) but rarely right.
  EXPECT_GT(ss.rounds, 0);
  EXPECT_GT(ss.drafted, 0);
}

TEST(DrafterFactory, SpecsAreCheckedAndAutoPicksTheBestGiven) {
  Models& ms = models();
  LoadedK3& m = *ms.target;
  EXPECT_FAILS_WITH(factory("bogus", m), "--draft bogus: unknown drafter");
  EXPECT_FAILS_WITH(factory("replay:/nonexistent/ids", m), "/nonexistent/ids is not a file");
  EXPECT_FAILS_WITH(factory("dspark:", m), "a path is needed after the colon");
  EXPECT_FAILS_WITH(factory("dspark:" + ms.qwen, m), ms.qwen + "/config.json");

  EXPECT_EQ(factory("none", m).make({1, 2}, false), nullptr);
  EXPECT_EQ(factory("ngram", m).make({1, 2}, false)->name(), "ngram");
  DrafterFactory bare = factory("auto", m);
  EXPECT_EQ(bare.make({1}, true)->name(), "ngram");
  EXPECT_EQ(bare.describe(), "auto (chats: ngram, completions: ngram)");
  DrafterFactory both = factory("auto", m, ms.dspark, ms.qwen);
  EXPECT_EQ(both.make({1}, true)->name(), "dspark");
  EXPECT_EQ(both.make({1}, false)->name(), "model");
  EXPECT_EQ(both.describe(), "auto (chats: dspark, completions: model)");
  DrafterFactory dspark_only = factory("auto", m, ms.dspark);
  EXPECT_EQ(dspark_only.make({1}, false)->name(), "dspark");
}

// DSpark drafts from K3's hidden states: the factory refuses it for a target
// of another family, naming the flag and the family, before reading DIR.
TEST(DrafterFactory, DSparkIsRefusedForATargetOfAnotherFamily) {
  LoadedModel& qwen3_moe = test::shared_family_model("qwen3_moe", 3);
  EXPECT_FAILS_WITH(factory("dspark:/nonexistent/dspark", qwen3_moe),
                    "--draft dspark:DIR is not available for Qwen3-MoE (GQA, BF16 experts) models (only Kimi K3 has it)");
  EXPECT_FAILS_WITH(factory("auto", qwen3_moe, "/nonexistent/dspark"), "--draft dspark:DIR is not available for Qwen3-MoE");
}
