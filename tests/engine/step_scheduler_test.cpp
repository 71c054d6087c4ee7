// StepScheduler's policy on a model that only records what each step held:
// decode passes join whole and first, the rest of the row budget goes to the
// prefills (a quarter the oldest's, the rest to the least left first), a sliced pass gives what the whole pass
// gives, cancellation happens between steps at a slice boundary, and an
// error reaches every request of its step.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/step_scheduler.h"
#include "util/error.h"

namespace deltafin {
namespace step_scheduler_test {
namespace {

// A session is a running hash of every token it consumed, so a pass's
// logits depend on every row before it (as a real model's do): a slice run
// out of order or twice shows.
struct HashSession : ModelSession {
  int id = 0;
  std::vector<uint64_t> states{0};  // state after each length
  int64_t length() const override { return static_cast<int64_t>(states.size()) - 1; }
  uint64_t bytes() const override { return 0; }
};
struct LengthMark : SessionMark {};

class RecordingModel final : public CausalModel {
public:
  const ModelSummary& summary() const override { return summary_; }
  std::unique_ptr<ModelSession> new_session() const override { return std::make_unique<HashSession>(); }

  Rows forward(ModelSession& s, std::span<const uint32_t> tokens, bool all_logits, const PassShape&) override {
    auto& h = dynamic_cast<HashSession&>(s);
    Rows out(all_logits ? tokens.size() : 1, 2);
    for (size_t t = 0; t < tokens.size(); ++t) {
      h.states.push_back(h.states.back() * 1000003u + tokens[t] + 1);
      const size_t r = all_logits ? t : 0;
      out.row(r)[0] = static_cast<float>(h.states.back() % 65521);
      out.row(r)[1] = static_cast<float>(h.length());
    }
    return out;
  }
  std::vector<Rows> forward_batch(std::span<const BatchPart> parts, const PassShape& shape) override {
    {
      std::unique_lock lock(mu);
      std::vector<std::pair<int, size_t>> step;
      for (const BatchPart& p : parts) step.push_back({dynamic_cast<HashSession*>(p.session)->id, p.tokens.size()});
      steps.push_back(step);
      gate_cv.wait(lock, [&] { return open; });
      if (fail_next) {
        fail_next = false;
        fail("the expert read failed (test)");
      }
    }
    std::vector<Rows> out;
    for (const BatchPart& p : parts) out.push_back(forward(*p.session, p.tokens, p.all_logits, shape));
    return out;
  }
  std::shared_ptr<SessionMark> mark(const ModelSession& s) const override {
    auto m = std::make_shared<LengthMark>();
    m->length = s.length();
    return m;
  }
  void rewind(ModelSession& s, const SessionMark& m) const override {
    dynamic_cast<HashSession&>(s).states.resize(static_cast<size_t>(m.length) + 1);
  }
  std::unique_ptr<ModelSession> copy_at(const ModelSession&, const SessionMark&) const override { return nullptr; }
  uint64_t state_values(int64_t) const override { return 0; }
  void for_each_state_part(const ModelSession&, const SessionMark&, const StatePartFn&) const override {}
  void read_state(ModelSession&, int64_t, const StateReadFn&) const override {}
  Rows forward_verify(ModelSession& s, std::span<const uint32_t> tokens) override { return forward(s, tokens, true, {}); }
  void keep_verified(ModelSession&, size_t) override {}
  const std::vector<std::vector<Route>>& last_routes() const override { return routes_; }

  void close_gate() {
    std::lock_guard lock(mu);
    open = false;
  }
  void open_gate() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    gate_cv.notify_all();
  }
  std::vector<std::vector<std::pair<int, size_t>>> recorded() {
    std::lock_guard lock(mu);
    return steps;
  }

  std::mutex mu;
  std::condition_variable gate_cv;
  bool open = true, fail_next = false;
  std::vector<std::vector<std::pair<int, size_t>>> steps;  // per step: (session id, rows)

private:
  ModelSummary summary_{.family = "test", .layers = 4};
  std::vector<std::vector<Route>> routes_;
};

std::vector<uint32_t> tokens(size_t n, uint32_t base) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<uint32_t>(i);
  return v;
}

void wait_waiting(const StepScheduler& s, size_t n) {
  for (int i = 0; i < 20'000 && s.waiting() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(s.waiting(), n);
}

TEST(StepScheduler, DecodeFirstThenTheOldestsQuarterThenTheShortestPrefill) {
  RecordingModel m;
  std::mutex model_mu;
  StepScheduler s(m, model_mu, 10, /*pace=*/false);
  // Request 9 holds the first step at the gate while the others hand in
  // their passes, so the second step sees them all at once.
  m.close_gate();
  auto blocker = s.client(9);
  HashSession b;
  b.id = 9;
  const std::vector<uint32_t> one = tokens(1, 7);
  std::thread tb([&] { blocker->forward(b, one, false); });
  for (int i = 0; i < 2000 && m.recorded().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(m.recorded().size(), 1u);
  struct Req {
    std::unique_ptr<StepScheduler::Client> c;
    HashSession s;
    std::vector<uint32_t> t;
    Rows out;
  };
  std::vector<Req> reqs(4);
  const size_t rows[] = {40, 20, 1, 1};  // prefills A (oldest) and B, decodes C and D
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    reqs[i].c = s.client(static_cast<uint64_t>(i));
    reqs[i].s.id = i;
    reqs[i].t = tokens(rows[i], 100 * static_cast<uint32_t>(i));
    threads.emplace_back([&, i] { reqs[i].out = reqs[i].c->forward(reqs[i].s, reqs[i].t, false); });
    wait_waiting(s, static_cast<size_t>(i) + 1);  // handed in in this order
  }
  m.open_gate();
  for (auto& t : threads) t.join();
  tb.join();
  const auto steps = m.recorded();
  ASSERT_GE(steps.size(), 4u);
  EXPECT_EQ(steps.size(), 8u);
  // Step 2: the decodes whole and first; of the 8 rows left, 2 are A's (a
  // quarter: the oldest's), 6 go to B (the least left).
  const std::vector<std::pair<int, size_t>> second = {{2, 1}, {3, 1}, {0, 2}, {1, 6}};
  EXPECT_EQ(steps[1], second);
  // Step 3: 10 rows, A's quarter 2, B 8; step 4: B's last 6, A 2 + the 2 left.
  const std::vector<std::pair<int, size_t>> third = {{0, 2}, {1, 8}}, fourth = {{0, 4}, {1, 6}};
  EXPECT_EQ(steps[2], third);
  EXPECT_EQ(steps[3], fourth);
  // Then A alone, 10 rows a step: 40 = 2 + 2 + 4 + 10 + 10 + 10 + 2.
  size_t a_rows = 0;
  for (const auto& step : steps)
    for (const auto& [id, n] : step) a_rows += id == 0 ? n : 0;
  EXPECT_EQ(a_rows, 40u);
  // Sliced or not, each request's last row is what one whole pass gives.
  for (int i = 0; i < 4; ++i) {
    HashSession whole;
    const Rows want = m.forward(whole, reqs[i].t, false, {});
    EXPECT_EQ(reqs[i].out.v, want.v) << "request " << i;
    EXPECT_EQ(reqs[i].s.states, whole.states) << "request " << i;
  }
}

TEST(StepScheduler, EveryRowsLogitsOfASlicedPassComeInOrder) {
  RecordingModel m;
  std::mutex model_mu;
  StepScheduler s(m, model_mu, 16);
  auto c = s.client(0);
  HashSession sliced, whole;
  const std::vector<uint32_t> t = tokens(50, 3);  // 4 slices of at most 16 rows
  const Rows got = c->forward(sliced, t, true);
  const Rows want = m.forward(whole, t, true, {});
  EXPECT_EQ(got.T, 50u);
  EXPECT_EQ(got.v, want.v);
  EXPECT_EQ(m.recorded().size(), 4u);
}

TEST(StepScheduler, ACancelledPrefillStopsAtASliceBoundary) {
  RecordingModel m;
  std::mutex model_mu;
  StepScheduler s(m, model_mu, 8);
  auto c = s.client(0);
  HashSession h;
  const std::vector<uint32_t> t = tokens(400, 1);
  // The first step waits at the gate until the request has asked to stop;
  // the scheduler sees it before the second.
  std::atomic<bool> stop{false}, asked{false};
  PassShape shape;
  shape.cancelled = [&] {
    if (!stop.load()) return false;
    asked.store(true);
    return true;
  };
  Rows got;
  m.close_gate();
  std::thread run([&] { got = c->forward(h, t, false, shape); });
  for (int i = 0; i < 20'000 && m.recorded().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(m.recorded().size(), 1u);
  stop.store(true);
  for (int i = 0; i < 20'000 && !asked.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(asked.load());
  m.open_gate();
  run.join();
  EXPECT_EQ(got.T, 0u) << "a cancelled pass returns no logits";
  const size_t steps = m.recorded().size();
  EXPECT_EQ(steps, 1u) << "no step ran after the request asked to stop";
  EXPECT_EQ(h.length(), 8) << "the session holds the one slice that ran";
}

TEST(StepScheduler, AFarPrefillGetsFewerRowsAStep) {
  // A prefill 6,000 positions in costs 1 + 6000 / 2048 = 3 units a row:
  // a budget of 12 gives it 4 rows a step.
  RecordingModel m;
  std::mutex model_mu;
  StepScheduler s(m, model_mu, 12, /*pace=*/false);
  auto c = s.client(0);
  HashSession h;
  h.states.resize(6001, 1);
  const std::vector<uint32_t> t = tokens(20, 1);
  c->forward(h, t, false);
  const auto steps = m.recorded();
  ASSERT_EQ(steps.size(), 5u);
  for (const auto& step : steps) EXPECT_EQ(step.at(0).second, 4u);
}

TEST(StepScheduler, AFailedStepFailsEveryRequestInIt) {
  RecordingModel m;
  std::mutex model_mu;
  StepScheduler s(m, model_mu, 8);
  m.close_gate();
  auto c0 = s.client(0), c1 = s.client(1);
  HashSession a, b;
  a.id = 0, b.id = 1;
  const std::vector<uint32_t> t = tokens(1, 5);
  std::string e0, e1;
  std::thread t0([&] {
    try {
      c0->forward(a, t, false);
    } catch (const Error& e) {
      e0 = e.what();
    }
  });
  for (int i = 0; i < 2000 && m.recorded().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread t1([&] {
    try {
      c1->forward(b, t, false);
    } catch (const Error& e) {
      e1 = e.what();
    }
  });
  wait_waiting(s, 1);
  {
    std::lock_guard lock(m.mu);
    m.fail_next = true;  // the first step fails
  }
  m.open_gate();
  t0.join();
  t1.join();
  EXPECT_NE(e0.find("expert read failed"), std::string::npos) << e0;
  EXPECT_TRUE(e1.empty()) << "the second request ran in the next step: " << e1;
}

TEST(StepScheduler, PrefillBesideDecodingTakesAboutOneDecodeStep) {
  // A decode step of 0.5 s and 1/32 s a prefill unit: 16 units fit.
  EXPECT_EQ(prefill_budget_beside_decode(0.5, 0.03125, 256), 16u);
  EXPECT_EQ(prefill_budget_beside_decode(0.6, 0.001, 256), 256u);  // within the row budget
  EXPECT_EQ(prefill_budget_beside_decode(0.001, 0.5, 256), 1u);    // at least one row
  EXPECT_EQ(prefill_budget_beside_decode(0.0, 0.5, 256), 256u);    // unmeasured: the row budget
  EXPECT_EQ(prefill_budget_beside_decode(0.6, 0.0, 256), 256u);
  // Seven prompts beside one decoding request: seven decode steps' worth.
  EXPECT_EQ(prefill_budget_beside_decode(0.5, 0.03125, 256, 7, 1), 112u);
  EXPECT_EQ(prefill_budget_beside_decode(0.5, 0.03125, 256, 1, 7), 16u);  // never below one decode step
}

TEST(StepScheduler, ALonePrefillRunsWholeWhereSlicesWouldRereadExperts) {
  RecordingModel m;
  std::mutex model_mu;
  StepScheduler s(m, model_mu, 8, /*pace=*/false, /*whole_alone=*/true);
  auto c = s.client(0);
  HashSession h;
  const std::vector<uint32_t> t = tokens(50, 3);
  c->forward(h, t, false);
  const auto steps = m.recorded();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].at(0).second, 50u);
}

}  // namespace
}  // namespace step_scheduler_test
}  // namespace deltafin
