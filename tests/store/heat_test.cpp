// The heat histogram: counts, decay, hottest order, and heat.json round trip
// with shape and content checks.
#include "store/heat.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "store/install.h"

#include "support/test_support.h"
#include "util/file.h"

using namespace deltafin;
using deltafin::test::TempDir;

TEST(Heat, AddDecayAndTotal) {
  HeatHistogram h(3, 4);
  EXPECT_EQ(h.layers(), 3);
  EXPECT_EQ(h.experts(), 4);
  h.add(1, 2);
  h.add(1, 2, 2.5);
  h.add(2, 0, 0.5);
  EXPECT_EQ(h.at(1, 2), 3.5);
  EXPECT_EQ(h.at(0, 0), 0.0);
  EXPECT_EQ(h.total(), 4.0);
  h.decay(0.5);
  EXPECT_EQ(h.at(1, 2), 1.75);
  EXPECT_EQ(h.total(), 2.0);
  EXPECT_FAILS_WITH(h.add(3, 0), "layer 3");
  EXPECT_FAILS_WITH(h.at(0, 4), "expert 4");
}

TEST(Heat, HottestFirstTiesToLowerLayerThenExpert) {
  HeatHistogram h(3, 4);
  h.add(2, 3, 5);
  h.add(1, 1, 7);
  h.add(2, 0, 5);
  h.add(1, 3, 5);
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(h.hottest(10), (std::vector<P>{{1, 1}, {1, 3}, {2, 0}, {2, 3}}));  // only count > 0
  EXPECT_EQ(h.hottest(2), (std::vector<P>{{1, 1}, {1, 3}}));
  EXPECT_TRUE(h.hottest(0).empty());
}

TEST(Heat, SaveLoadRoundTripAndAbsentFile) {
  TempDir dir;
  HeatHistogram empty = HeatHistogram::load(dir.path(), 2, 3);
  EXPECT_EQ(empty.layers(), 2);
  EXPECT_EQ(empty.total(), 0.0);
  HeatHistogram h(2, 3);
  h.add(1, 2, 0.1);
  h.add(0, 1, 12345.678);
  h.save(dir.path());
  HeatHistogram back = HeatHistogram::load(dir.path(), 2, 3);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t e = 0; e < 3; ++e) EXPECT_EQ(back.at(l, e), h.at(l, e)) << l << "," << e;
  // The documented file format.
  auto j = nlohmann::json::parse(read_text_file(dir.file("heat.json")));
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["layers"], 2);
  EXPECT_EQ(j["experts"], 3);
  EXPECT_EQ(j["counts"].size(), 6u);
  EXPECT_EQ(j["counts"][5].get<double>(), 0.1);
}

TEST(Heat, MalformedFilesAreNamedErrors) {
  TempDir dir;
  const std::string path = dir.file("heat.json");
  HeatHistogram(2, 3).save(dir.path());
  EXPECT_FAILS_WITH(HeatHistogram::load(dir.path(), 3, 3), path, "layers", "2 x 3", "3 x 3");
  write_file_atomic(path, "{not json");
  EXPECT_FAILS_WITH(HeatHistogram::load(dir.path(), 2, 3), path, "JSON");
  write_file_atomic(path, R"({"version":2,"layers":2,"experts":3,"counts":[0,0,0,0,0,0]})");
  EXPECT_FAILS_WITH(HeatHistogram::load(dir.path(), 2, 3), path, "version");
  write_file_atomic(path, R"({"version":1,"layers":2,"experts":3,"counts":[0,0,0,0,0]})");
  EXPECT_FAILS_WITH(HeatHistogram::load(dir.path(), 2, 3), path, "counts", "5 entries");
  write_file_atomic(path, R"({"version":1,"layers":2,"experts":3,"counts":[0,0,0,0,-1,0]})");
  EXPECT_FAILS_WITH(HeatHistogram::load(dir.path(), 2, 3), path, "counts[4]");
  write_file_atomic(path, R"({"version":1,"layers":2,"counts":[0,0,0,0,0,0]})");
  EXPECT_FAILS_WITH(HeatHistogram::load(dir.path(), 2, 3), path, "experts");
}

// heat.json's writer (a run or serve) holds the store's lock shared while its
// temporary exists: while a setup holds it, nothing is written, so the setup's
// sweep never meets a live writer's temporary.
TEST(Heat, NotSavedWhileASetupHoldsTheStore) {
  TempDir dir;
  HeatHistogram h(2, 3);
  h.add(1, 2, 5.0);
  ASSERT_TRUE(h.save(dir.path()));
  const std::string before = deltafin::test::read_bytes(dir.file("heat.json"));
  h.add(0, 0);
  {
    const StoreLock setup(dir.path());
    EXPECT_FALSE(h.save(dir.path()));
    EXPECT_EQ(deltafin::test::read_bytes(dir.file("heat.json")), before);
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
  EXPECT_TRUE(h.save(dir.path()));
  EXPECT_EQ(HeatHistogram::load(dir.path(), 2, 3).at(0, 0), 1.0);
}

// The temporal reuse travels in heat.json; a file from before it (no field)
// loads with none; a bad field is refused naming it.
TEST(Heat, ReuseIsSavedAndChecked) {
  TempDir d;
  HeatHistogram h(2, 3);
  h.add(1, 2, 4.0);
  h.add_reuse(3.0, 12.0);
  ASSERT_TRUE(h.save(d.path()));
  const HeatHistogram back = HeatHistogram::load(d.path(), 2, 3);
  EXPECT_EQ(back.reused(), 3.0);
  EXPECT_EQ(back.routed(), 12.0);
  write_file_atomic(d.path() + "/heat.json", R"({"version":1,"layers":2,"experts":3,"counts":[0,0,0,0,0,1]})");
  EXPECT_EQ(HeatHistogram::load(d.path(), 2, 3).routed(), 0.0);
  write_file_atomic(d.path() + "/heat.json",
                    R"({"version":1,"layers":2,"experts":3,"counts":[0,0,0,0,0,1],"reuse":[5,4]})");
  EXPECT_THROW(
      {
        try {
          HeatHistogram::load(d.path(), 2, 3);
        } catch (const std::exception& e) {
          EXPECT_NE(std::string(e.what()).find("heat.json: field 'reuse' = [5, 4]"), std::string::npos) << e.what();
          throw;
        }
      },
      std::exception);
}

