// Several requests on one engine (EngineSettings::parallel > 1): each gets
// exactly the tokens and logits it gets alone, whatever runs beside it, when
// it starts, and however its prompt is sliced; cancelling one leaves the
// others untouched. The reference is an engine with parallel 1 and no prompt
// cache running each request by itself.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include <filesystem>
#include <map>

#include "backend/select/make_backend.h"
#include "engine/engine.h"
#include "model/loaders/drafter_factory.h"
#include "model/loaders/family_loaders.h"
#include "store/setup.h"
#include "support/family_model.h"

namespace deltafin {
namespace concurrent_engine_test {
namespace {

struct Ask {
  std::vector<uint32_t> prompt;
  int stop_after = -1;        // on_token returns false after this many tokens (-1: never)
  bool cancel_in_prefill = false;  // cancelled() says yes once the prefill has begun
};

struct Got {
  std::vector<uint32_t> tokens;
  std::vector<uint32_t> logit_bits;  // every reported logit's bits, in order
  Finish finish = Finish::Length;
  int64_t cached = 0;
};

std::vector<uint32_t> ids(uint32_t seed, size_t n, uint32_t vocab) {
  std::vector<uint32_t> v(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (auto& t : v) {
    x = x * 1664525u + 1013904223u;
    t = 3 + (x >> 8) % (vocab - 6);
  }
  return v;
}

Got run_one(Engine& e, const Ask& a, LiveProgress* progress) {
  Got g;
  GenerateRequest r;
  r.prompt = a.prompt;
  r.max_new = 10;
  r.stop.ignore_end_token = true;  // every request makes its 10 tokens (unless stopped)
  r.progress = progress;
  r.on_logits = [&](const float* l, size_t n) {
    const size_t at = g.logit_bits.size();
    g.logit_bits.resize(at + n);
    std::memcpy(g.logit_bits.data() + at, l, n * sizeof(float));
  };
  std::atomic<bool> began{false};
  const Outcome o = e.generate(
      r,
      [&](uint32_t id) {
        g.tokens.push_back(id);
        return a.stop_after < 0 || static_cast<int>(g.tokens.size()) < a.stop_after;
      },
      [&] { return a.cancel_in_prefill && progress && progress->prefill_done.load() > 0; });
  g.finish = o.finish;
  g.cached = o.cached_tokens;
  return g;
}

// The family's tiny model streamed from a store on two drives (the same
// checkpoint as shared_family_model's seed 31), with a cache that holds
// only part of the experts, so steps read experts as they go.
LoadedModel& streamed_model(const std::string& family) {
  struct Slot {
    test::TempDir root;
    std::unique_ptr<LoadedModel> m;
  };
  static std::map<std::string, std::unique_ptr<Slot>> slots;
  auto& slot = slots[family];
  if (!slot) {
    slot = std::make_unique<Slot>();
    const std::string r = slot->root.path();
    test::generate_tiny_checkpoint(family, r + "/ckpt", 31);
    SetupOptions so;
    so.from = r + "/ckpt";
    so.store = r + "/store";
    for (int d = 0; d < 2; ++d) {
      so.drives.push_back(r + "/drive" + std::to_string(d));
      std::filesystem::create_directories(so.drives.back());
      so.drive_mbps.push_back(1000.0);
    }
    so.spine = "bf16";
    so.quiet = true;
    run_setup(so);
    ModelSource src;
    src.store = so.store;
    src.options.threads = 1;
    src.options.cache_gb = 0.0005;  // a few experts' worth: most routed experts are read
    src.options.backend = backend_choice_from_env();  // DELTAFIN_BACKEND=vulkan: the Vulkan run of tests/CMakeLists.txt
    slot->m = load_model(src);
  }
  return *slot->m;
}

class ConcurrentEngineTest : public ::testing::TestWithParam<std::tuple<std::string, std::string, bool>> {
protected:
  LoadedModel& lm() {
    return std::get<2>(GetParam()) ? streamed_model(std::get<0>(GetParam()))
                                   : test::shared_family_model(std::get<0>(GetParam()), 31);
  }
  EngineSettings settings(int parallel) {
    EngineSettings s;
    s.max_tokens_ceiling = 64;
    s.context_limit = 512;
    s.session_budget_bytes = 256ull << 20;
    s.prefill_chunk = 8;
    s.draft = parse_draft_spec(std::get<1>(GetParam()));
    s.parallel = parallel;
    s.step_rows = 24;  // small steps: the long prompt is prefilled in many slices beside the others
    s.prompt_cache_entries = parallel > 1 ? 4 : 0;
    return s;
  }
};

TEST_P(ConcurrentEngineTest, EveryRequestGetsTheBitsItGetsAlone) {
  const uint32_t V = static_cast<uint32_t>(lm().causal().summary().vocab);
  const std::vector<uint32_t> long_prompt = ids(1, 150, V);
  std::vector<Ask> asks(6);
  asks[0].prompt = long_prompt;
  asks[1].prompt = ids(2, 7, V);
  asks[2].prompt = std::vector<uint32_t>(long_prompt.begin(), long_prompt.begin() + 90);  // shares a prefix with 0
  for (uint32_t t : ids(3, 20, V)) asks[2].prompt.push_back(t);
  asks[3].prompt = asks[1].prompt;  // a repeat: reuses 1's state when 1 has finished
  asks[4].prompt = ids(4, 30, V);
  asks[4].stop_after = 3;  // its client stops it after 3 tokens
  asks[5].prompt = ids(5, 120, V);
  asks[5].cancel_in_prefill = true;

  std::vector<Got> alone;
  {
    Engine solo(lm(), settings(1), nullptr);
    for (const Ask& a : asks) {
      LiveProgress p;
      alone.push_back(run_one(solo, a, &p));
    }
  }
  Engine e(lm(), settings(4), nullptr);
  EngineTestHooks hooks;
  hooks.prefill_delay_ms = 2;  // prefill steps are slower, so the requests overlap
  e.set_test_hooks(hooks);
  std::vector<Got> together(asks.size());
  std::vector<LiveProgress> progress(asks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < asks.size(); ++i) {
    // Staggered: each starts once the one before it is running.
    if (i > 0)
      while (progress[i - 1].phase.load() == 0 && together[i - 1].tokens.empty() &&
             together[i - 1].finish == Finish::Length)
        std::this_thread::yield();
    threads.emplace_back([&, i] { together[i] = run_one(e, asks[i], &progress[i]); });
    if (i == 0)  // the rest start while the long prompt is being prefilled
      while (progress[0].prefill_done.load() == 0 && progress[0].phase.load() != 2) std::this_thread::yield();
  }
  for (auto& t : threads) t.join();

  for (size_t i = 0; i < asks.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(together[i].finish, alone[i].finish);
    EXPECT_EQ(together[i].tokens, alone[i].tokens);
    EXPECT_TRUE(together[i].logit_bits == alone[i].logit_bits) << "logits differ from the request's solo run";
  }
  EXPECT_EQ(alone[4].tokens.size(), 3u);
  EXPECT_EQ(alone[4].finish, Finish::Stopped);
  EXPECT_TRUE(together[5].tokens.empty());
  EXPECT_EQ(together[5].finish, Finish::Cancelled);
  const Engine::StepTotals st = e.step_totals();
  EXPECT_GT(st.steps, 0);
  EXPECT_GT(st.prefill_rows, 0);
  // The prefill of 150 rows alone needs 7 steps of 24: slices did run.
  EXPECT_GE(st.steps, 7);
  EXPECT_LE(st.max_parts, static_cast<int64_t>(asks.size()));
}

INSTANTIATE_TEST_SUITE_P(
    Families, ConcurrentEngineTest,
    ::testing::Combine(::testing::ValuesIn(test::target_families()), ::testing::Values("none", "ngram"),
                       ::testing::Values(false, true)),
    [](const ::testing::TestParamInfo<std::tuple<std::string, std::string, bool>>& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param) + (std::get<2>(info.param) ? "_streamed" : "_resident");
    });

}  // namespace
}  // namespace concurrent_engine_test
}  // namespace deltafin
