// The pass driver (model/common/pass_driver.h): the expert source's pass
// begun once and ended exactly once however the pass ends, the layer hook
// (cancel first, then progress), and the throttled, sticky cancellation poll.
// No sleeps: intervals are 0 (every poll asks) or hours (none within it).
#include "model/common/pass_driver.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "util/error.h"

namespace deltafin {
namespace {

// Counts the pass protocol; has no experts.
class CountingSource : public ExpertSource {
public:
  ExpertHandle get(int64_t layer, int64_t expert) override {
    fail("counting source: no expert (", layer, ", ", expert, ")");
  }
  void begin_pass(size_t positions) override {
    ++begins;
    this->positions = positions;
  }
  void end_pass() override { ++ends; }
  int begins = 0, ends = 0;
  size_t positions = 0;
};

constexpr std::chrono::microseconds kHours = std::chrono::hours(10);

TEST(PassDriver, BeginsAndEndsThePassOnce) {
  CountingSource source;
  PassShape shape;
  {
    PassDriver pass(source, 7, shape);
    EXPECT_EQ(source.begins, 1);
    EXPECT_EQ(source.positions, 7u);
    EXPECT_EQ(source.ends, 0);
    EXPECT_TRUE(pass.begin_layer(0));
  }
  EXPECT_EQ(source.begins, 1);
  EXPECT_EQ(source.ends, 1);
}

TEST(PassDriver, AnExceptionMidPassStillEndsIt) {
  CountingSource source;
  PassShape shape;
  EXPECT_THROW(
      {
        PassDriver pass(source, 3, shape);
        pass.begin_layer(0);
        source.get(0, 5);  // an expert read error half-way through
      },
      Error);
  EXPECT_EQ(source.begins, 1);
  EXPECT_EQ(source.ends, 1);
}

TEST(PassDriver, EndExpertsThenDestructionEndsOnce) {
  CountingSource source;
  PassShape shape;
  {
    PassDriver pass(source, 2, shape);
    pass.end_experts();
    EXPECT_EQ(source.ends, 1);
    pass.end_experts();  // a second call is a no-op
    EXPECT_EQ(source.ends, 1);
  }
  EXPECT_EQ(source.begins, 1);
  EXPECT_EQ(source.ends, 1);
}

TEST(PassDriver, BeginLayerAsksCancelledThenReportsTheLayer) {
  CountingSource source;
  std::vector<std::string> events;
  bool cancel = false;
  PassShape shape;
  shape.poll_interval = kHours;  // begin_layer is not throttled
  shape.cancelled = [&] {
    events.push_back("cancelled?");
    return cancel;
  };
  shape.on_layer = [&](int64_t l) { events.push_back("layer " + std::to_string(l)); };
  PassDriver pass(source, 1, shape);
  EXPECT_TRUE(pass.begin_layer(0));
  EXPECT_TRUE(pass.begin_layer(1));
  EXPECT_EQ(events, (std::vector<std::string>{"cancelled?", "layer 0", "cancelled?", "layer 1"}));
  events.clear();
  cancel = true;
  EXPECT_FALSE(pass.begin_layer(2));  // a cancelled pass does not report the layer
  EXPECT_EQ(events, (std::vector<std::string>{"cancelled?"}));
  // Sticky: no longer asked, still cancelled, inside a layer too.
  events.clear();
  cancel = false;
  EXPECT_FALSE(pass.begin_layer(3));
  EXPECT_TRUE(pass.cancel_requested());
  EXPECT_TRUE(pass.poll()());
  EXPECT_TRUE(events.empty());
}

TEST(PassDriver, WithoutACancelCallbackNothingCancels) {
  CountingSource source;
  std::vector<int64_t> layers;
  PassShape shape;
  shape.poll_interval = std::chrono::microseconds(0);
  shape.on_layer = [&](int64_t l) { layers.push_back(l); };
  PassDriver pass(source, 1, shape);
  EXPECT_FALSE(static_cast<bool>(pass.poll()));  // blocks then skip their polls
  EXPECT_FALSE(pass.cancel_requested());
  EXPECT_TRUE(pass.begin_layer(4));
  EXPECT_TRUE(pass.begin_layer(5));
  EXPECT_EQ(layers, (std::vector<int64_t>{4, 5}));
}

TEST(PassDriver, ZeroIntervalAsksEveryTimeAndStaysCancelled) {
  CountingSource source;
  int asked = 0;
  PassShape shape;
  shape.poll_interval = std::chrono::microseconds(0);
  shape.cancelled = [&] { return ++asked == 3; };  // yes once, at the third question
  PassDriver pass(source, 1, shape);
  EXPECT_FALSE(pass.cancel_requested());
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(pass.poll()());  // the blocks' callback is the same poll
  EXPECT_EQ(asked, 2);
  EXPECT_TRUE(pass.cancel_requested());
  EXPECT_EQ(asked, 3);
  // The callback would say no now; the pass stays cancelled without asking.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(pass.cancel_requested());
  EXPECT_TRUE(pass.poll()());
  EXPECT_FALSE(pass.begin_layer(1));
  EXPECT_EQ(asked, 3);
}

TEST(PassDriver, ALongIntervalDoesNotAskAgainWithinIt) {
  CountingSource source;
  int asked = 0;
  PassShape shape;
  shape.poll_interval = kHours;
  shape.cancelled = [&] {
    ++asked;
    return false;
  };
  PassDriver pass(source, 1, shape);
  // The interval runs from the driver's start: no question inside a layer yet.
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(pass.cancel_requested());
  EXPECT_EQ(asked, 0);
  // begin_layer always asks; polls inside the layer still do not.
  EXPECT_TRUE(pass.begin_layer(0));
  EXPECT_EQ(asked, 1);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(pass.poll()());
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(pass.begin_layer(1));
  EXPECT_EQ(asked, 2);
}

}  // namespace
}  // namespace deltafin
