// The DeepSeek-V3 family's forward pass against the independent float64
// reference (reference_deepseek_v3.h, written from the Hugging Face and
// DeepSeek modeling code): every flavour the maker writes (FP8 with grouped
// routing and query compression, FP8 with a plain q_proj, Kimi K2's FP8 with
// one group and YaRN betas 1 / 1, K2-Thinking's INT4 experts), every
// position's logits within 1e-5 relative L2 and 32 greedy tokens equal; and
// the determinism the runtime promises: a T-position pass equals T
// one-position passes bit for bit on every ISA path and thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "format/checkpoint.h"
#include "kernels/isa.h"
#include "model/common/greedy.h"
#include "model/deepseek_v3/generator.h"
#include "model/deepseek_v3/model.h"
#include "model/deepseek_v3/weights.h"
#include "deepseek_v3/reference_deepseek_v3.h"
#include "deepseek_v3/tiny_checkpoint.h"
#include "support/batch_compare.h"
#include "support/test_support.h"
#include "util/thread_pool.h"

namespace deltafin {
namespace deepseek_v3_forward_test {
namespace {

struct Loaded {
  DeepseekV3Config config;
  Checkpoint checkpoint;
  DeepseekV3Weights weights;
  std::unique_ptr<ResidentExpertSource> experts;
  explicit Loaded(const std::string& dir)
      : config(read_deepseek_v3_config(dir + "/config.json")), checkpoint(Checkpoint::open(dir)),
        weights(load_deepseek_v3_weights(config, checkpoint)),
        experts(load_resident_deepseek_v3_experts(config, checkpoint)) {}
};

// The maker's tiny checkpoint of `flavor`. Its rope dims (8) with the
// released rope_scaling (original 4096 positions) put YaRN's ramp inside the
// rotated pairs, so beta_fast and beta_slow decide pair 2's frequency.
std::string make(const test::TempDir& dir, DeepseekV3Flavor flavor, uint64_t seed) {
  DeepseekV3GenerateOptions o;
  o.out_dir = dir.path();
  o.seed = seed;
  o.flavor = flavor;
  o.dims = deepseek_v3_preset("tiny", flavor);
  o.progress = false;
  generate_deepseek_v3_checkpoint(o);
  return dir.path();
}

double relative_l2(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / den);
}

// fp32 against float64 on the same weights is a few 1e-7 relative per
// product; a wrong route, norm, RoPE pair or scale is O(1).
constexpr double kTolerance = 1e-5;

void expect_matches_reference(const std::string& dir, uint64_t seed) {
  Loaded m(dir);
  test::ReferenceDeepseekV3 ref(dir);
  const size_t V = static_cast<size_t>(m.config.vocab_size);
  const std::vector<uint32_t> tokens = test::random_tokens(seed + 11, 13, static_cast<uint32_t>(V));
  const std::vector<double> want = ref.logits(tokens);
  ThreadPool pool(2);
  DeepseekV3Model model(m.config, m.weights, *m.experts, &pool);
  std::unique_ptr<ModelSession> session = model.new_session();
  const Rows got = model.forward(*session, tokens, true);
  ASSERT_EQ(got.T, tokens.size());
  double worst = 0, rms = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const double e = relative_l2(got.row(t), want.data() + t * V, V);
    EXPECT_LE(e, kTolerance) << "position " << t;
    worst = std::max(worst, e);
  }
  for (size_t i = 0; i < V; ++i) rms += want[i] * want[i];
  EXPECT_GT(std::sqrt(rms / V), 0.1);  // not degenerate
  std::printf("worst relative L2 vs float64: %.3g\n", worst);

  // Greedy: the runtime decodes from its latent cache one token at a time;
  // the reference recomputes the whole sequence each time.
  uint32_t next = argmax_first(got.row(got.T - 1), V);
  std::vector<uint32_t> seq = tokens;
  for (int i = 0; i < 32; ++i) {
    const std::vector<double> r = ref.logits(seq);
    const double* last = r.data() + (seq.size() - 1) * V;
    const uint32_t ref_next = static_cast<uint32_t>(std::max_element(last, last + V) - last);
    ASSERT_EQ(next, ref_next) << "token " << i;
    seq.push_back(ref_next);
    const Rows one = model.forward(*session, std::span<const uint32_t>(&next, 1), false);
    next = argmax_first(one.row(0), V);
  }
}

TEST(DeepseekV3Model, Fp8GroupedRoutingMatchesFloat64Reference) {
  for (uint64_t seed : {3, 4}) {
    test::TempDir dir;
    expect_matches_reference(make(dir, DeepseekV3Flavor::DeepseekV3, seed), seed);
  }
}

TEST(DeepseekV3Model, PlainQProjMatchesFloat64Reference) {
  test::TempDir dir;
  expect_matches_reference(make(dir, DeepseekV3Flavor::DeepseekV3QProj, 5), 5);
}

TEST(DeepseekV3Model, KimiK2WithYarnBetasFromTheConfigMatchesFloat64Reference) {
  test::TempDir dir;
  expect_matches_reference(make(dir, DeepseekV3Flavor::KimiK2, 6), 6);
  const DeepseekV3Config c = read_deepseek_v3_config(dir.path() + "/config.json");
  EXPECT_EQ(c.yarn.beta_fast, 1.0);  // K2's, not the 32 a default would give
  EXPECT_EQ(c.n_group, 1);
}

TEST(DeepseekV3Model, Int4ExpertsMatchFloat64Reference) {
  test::TempDir dir;
  expect_matches_reference(make(dir, DeepseekV3Flavor::KimiK2Thinking, 7), 7);
}

TEST(DeepseekV3Model, TPositionsEqualSinglePositionsOnEveryIsaAndThreadCount) {
  for (DeepseekV3Flavor flavor : {DeepseekV3Flavor::DeepseekV3, DeepseekV3Flavor::KimiK2Thinking}) {
    SCOPED_TRACE(deepseek_v3_flavor_name(flavor));
    test::TempDir dir;
    Loaded m(make(dir, flavor, 8));
    const size_t V = static_cast<size_t>(m.config.vocab_size);
    const std::vector<uint32_t> tokens = test::random_tokens(4, 17, static_cast<uint32_t>(V));
    ThreadPool pool(3);
    DeepseekV3Model batched(m.config, m.weights, *m.experts, &pool);
    std::unique_ptr<ModelSession> s1 = batched.new_session();
    const Rows all = batched.forward(*s1, tokens, true);
    const Isa best = detect_isa();
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      SCOPED_TRACE(isa_name(isa));
      set_active_isa(isa);
      DeepseekV3Model single(m.config, m.weights, *m.experts, nullptr);
      std::unique_ptr<ModelSession> s2 = single.new_session();
      for (size_t t = 0; t < tokens.size(); ++t) {
        const Rows one = single.forward(*s2, std::span<const uint32_t>(&tokens[t], 1), false);
        EXPECT_EQ(std::memcmp(one.row(0), all.row(t), V * sizeof(float)), 0) << "position " << t;
      }
    }
    set_active_isa(best);
  }
}

// Several sessions in one pass (forward_batch): sessions at three lengths (0
// fresh, 1 with a 5-token prompt, 2 mid-decode), a decode row, a prompt with
// its last row's logits and a block with every row's, then a batch of decode
// rows and a sliced batch (slice_rows is not used by this family): each
// part's logits equal its solo pass's bit for bit, and plain decoding after
// them agrees.
TEST(DeepseekV3Batch, EachPartEqualsItsSoloPassAndTheSessionsAdvanceAlike) {
  Loaded m(test::tiny_checkpoint(DeepseekV3Flavor::DeepseekV3));
  const uint32_t V = static_cast<uint32_t>(m.config.vocab_size);
  ThreadPool pool(2);
  DeepseekV3Model model(m.config, m.weights, *m.experts, &pool);
  test::BatchBeside b(model);
  b.add(model.new_session());
  auto prefilled = model.new_session();
  model.forward(*prefilled, test::random_tokens(31, 5, V), false);
  b.add(std::move(prefilled));
  auto decoding = model.new_session();
  model.forward(*decoding, test::random_tokens(32, 4, V), false);
  for (uint32_t t : test::random_tokens(33, 2, V)) model.forward(*decoding, std::span<const uint32_t>(&t, 1), false);
  b.add(std::move(decoding));

  test::expect_batch_equals_solo(b, {{2, test::random_tokens(34, 1, V), false},
                                     {0, test::random_tokens(35, 6, V), false},
                                     {1, test::random_tokens(36, 4, V), true}});
  test::expect_batch_equals_solo(b, {{0, {7}, false}, {1, {8}, false}, {2, {9}, false}});
  PassShape sliced;
  sliced.slice_rows = 2;
  test::expect_batch_equals_solo(
      b, {{1, test::random_tokens(37, 5, V), true}, {2, test::random_tokens(38, 3, V), false}}, sliced);
  test::expect_sessions_agree(b, 10);
  const std::vector<uint32_t> ok = {1}, bad = {V};
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{b.batched[0].get(), ok}, {b.batched[1].get(), bad}}),
                    "batch part 1", "is outside the vocabulary");
}

}  // namespace
}  // namespace deepseek_v3_forward_test
}  // namespace deltafin
