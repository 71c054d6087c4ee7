// Checkpoint directories (k3-model.md §3.1): one model.safetensors, or shards
// model-NNNNN-of-MMMMMM.safetensors with or without an index whose weight map
// must agree exactly with the shard headers.
#include "format/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/k3_fixture.h"
#include "support/test_support.h"

using namespace deltafin;
using namespace deltafin::test;
using nlohmann::json;

namespace {

void shard(const std::string& path, const std::vector<TensorSpec>& tensors) {
  write_patterned_safetensors(path, tensors);
}

void index_file(const TempDir& dir, const json& weight_map) {
  write_bytes(dir.file("model.safetensors.index.json"),
              json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
}

const std::string kS1 = "model-00001-of-000002.safetensors";
const std::string kS2 = "model-00002-of-000002.safetensors";

// Two shards: a, b in the first; c in the second.
void two_shards(const TempDir& dir) {
  shard(dir.file(kS1), {{"a", DType::F32, {2}}, {"b", DType::BF16, {3, 1}}});
  shard(dir.file(kS2), {{"c", DType::U8, {5}}});
}

std::string file_name(const TensorRef& r) { return std::filesystem::path(r.shard->path()).filename().string(); }

}  // namespace

TEST(Checkpoint, ShardFileName) {
  EXPECT_EQ(shard_file_name(1, 96), "model-00001-of-000096.safetensors");
  EXPECT_EQ(shard_file_name(96, 96), "model-00096-of-000096.safetensors");
  EXPECT_EQ(shard_file_name(2, 2), "model-00002-of-000002.safetensors");
  EXPECT_EQ(shard_file_name(12345, 123456), "model-12345-of-123456.safetensors");
}

TEST(Checkpoint, SingleModelSafetensors) {
  TempDir dir;
  shard(dir.file("model.safetensors"), {{"w", DType::F32, {2, 2}}, {"v", DType::U8, {3}}});
  Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.dir(), dir.path());
  ASSERT_EQ(c.shards().size(), 1u);
  EXPECT_EQ(c.tensor_count(), 2u);
  EXPECT_EQ(c.names(), (std::vector<std::string>{"v", "w"}));
  EXPECT_EQ(c.total_bytes(), 16u + 3u);
  TensorRef w = c.find("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(file_name(w), "model.safetensors");
  EXPECT_EQ(w.info->shape, (std::vector<uint64_t>{2, 2}));
  std::string bytes(16, '\0');
  w.shard->read(*w.info, bytes.data());
  EXPECT_EQ(bytes, pattern_bytes("w", 16));
  EXPECT_FALSE(c.find("nothing"));
}

TEST(Checkpoint, TwoShardsWithoutIndex) {
  TempDir dir;
  two_shards(dir);
  write_bytes(dir.file("README.md"), "not a shard");
  write_bytes(dir.file("model-1-of-2.safetensors"), "not our naming: ignored");
  Checkpoint c = Checkpoint::open(dir.path());
  ASSERT_EQ(c.shards().size(), 2u);
  EXPECT_EQ(c.tensor_count(), 3u);
  EXPECT_EQ(c.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(file_name(c.find("a")), kS1);
  EXPECT_EQ(file_name(c.find("b")), kS1);
  EXPECT_EQ(file_name(c.find("c")), kS2);
  EXPECT_EQ(c.total_bytes(), 8u + 6u + 5u);
  std::string bytes(5, '\0');
  TensorRef t = c.find("c");
  t.shard->read(*t.info, bytes.data());
  EXPECT_EQ(bytes, pattern_bytes("c", 5));
}

TEST(Checkpoint, TwoShardsWithIndex) {
  TempDir dir;
  two_shards(dir);
  index_file(dir, {{"a", kS1}, {"b", kS1}, {"c", kS2}});
  Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.shards().size(), 2u);
  EXPECT_EQ(c.tensor_count(), 3u);
  EXPECT_EQ(file_name(c.find("c")), kS2);
}

TEST(Checkpoint, IndexNamesTensorItsShardLacks) {
  TempDir dir;
  two_shards(dir);
  const std::string idx = dir.file("model.safetensors.index.json");
  // "c" is in shard 2, the index says shard 1.
  index_file(dir, {{"a", kS1}, {"b", kS1}, {"c", kS1}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "tensor 'c'", kS1, "that shard has no such tensor",
                    "(it is in " + kS2 + ")");
  // "ghost" is in no shard at all.
  index_file(dir, {{"a", kS1}, {"b", kS1}, {"c", kS2}, {"ghost", kS2}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "tensor 'ghost'", kS2, "no such tensor");
}

TEST(Checkpoint, IndexNamesShardThatDoesNotExist) {
  TempDir dir;
  two_shards(dir);
  const std::string idx = dir.file("model.safetensors.index.json");
  index_file(dir, {{"a", kS1}, {"b", kS1}, {"c", "model-00003-of-000002.safetensors"}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "model-00003-of-000002.safetensors", "does not exist");
  index_file(dir, {{"a", kS1}, {"b", kS1}, {"c", "../" + kS2}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "../" + kS2, "outside the checkpoint directory");
}

TEST(Checkpoint, ShardTensorMissingFromIndex) {
  TempDir dir;
  two_shards(dir);
  const std::string idx = dir.file("model.safetensors.index.json");
  index_file(dir, {{"a", kS1}, {"c", kS2}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "tensor 'b'", kS1, "missing from weight_map");
  // A shard on disk the index never names still belongs to the checkpoint.
  index_file(dir, {{"a", kS1}, {"b", kS1}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "tensor 'c'", kS2, "missing from weight_map");
}

TEST(Checkpoint, MalformedIndex) {
  TempDir dir;
  two_shards(dir);
  const std::string idx = dir.file("model.safetensors.index.json");
  write_bytes(idx, "{\"weight_map\": ");
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "not valid JSON");
  write_bytes(idx, "{\"metadata\": {}}");
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "'weight_map'");
  write_bytes(idx, R"({"weight_map": {"a": 1}})");
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), idx, "weight_map['a'] is not a string");
}

TEST(Checkpoint, SameTensorInTwoShards) {
  TempDir dir;
  shard(dir.file(kS1), {{"a", DType::F32, {2}}, {"dup", DType::U8, {1}}});
  shard(dir.file(kS2), {{"dup", DType::U8, {1}}, {"c", DType::U8, {5}}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), dir.path(), "tensor 'dup'", "appears in two shards", kS1, kS2);
  index_file(dir, {{"a", kS1}, {"dup", kS1}, {"c", kS2}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), "tensor 'dup'", "appears in two shards");
}

TEST(Checkpoint, MissingShardInSeries) {
  TempDir dir;
  shard(dir.file("model-00001-of-000003.safetensors"), {{"a", DType::U8, {1}}});
  shard(dir.file("model-00003-of-000003.safetensors"), {{"c", DType::U8, {1}}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), dir.path(), "shard model-00002-of-000003.safetensors is missing");
  // With an index that only names the shards present, the gap is still found.
  index_file(dir, {{"a", "model-00001-of-000003.safetensors"}, {"c", "model-00003-of-000003.safetensors"}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), "model-00002-of-000003.safetensors is missing");
}

TEST(Checkpoint, ShardIndexOutsideSeries) {
  TempDir dir;
  shard(dir.file("model-00001-of-000002.safetensors"), {{"a", DType::U8, {1}}});
  shard(dir.file("model-00003-of-000002.safetensors"), {{"c", DType::U8, {1}}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), "model-00003-of-000002.safetensors", "shard index 3 outside 1..2");
}

TEST(Checkpoint, HuggingFaceFiveDigitTotals) {
  // The usual Hugging Face names (model-00001-of-00002) open like K3's, with
  // or without an index; a gap is named in the same width; one checkpoint may
  // not mix the two widths.
  TempDir dir;
  shard(dir.file("model-00001-of-00002.safetensors"), {{"a", DType::F32, {2}}});
  shard(dir.file("model-00002-of-00002.safetensors"), {{"c", DType::U8, {5}}});
  Checkpoint c = Checkpoint::open(dir.path());
  ASSERT_EQ(c.shards().size(), 2u);
  EXPECT_EQ(file_name(c.find("c")), "model-00002-of-00002.safetensors");
  index_file(dir, {{"a", "model-00001-of-00002.safetensors"}, {"c", "model-00002-of-00002.safetensors"}});
  EXPECT_EQ(Checkpoint::open(dir.path()).tensor_count(), 2u);

  TempDir gap;
  shard(gap.file("model-00001-of-00003.safetensors"), {{"a", DType::U8, {1}}});
  shard(gap.file("model-00003-of-00003.safetensors"), {{"c", DType::U8, {1}}});
  EXPECT_FAILS_WITH(Checkpoint::open(gap.path()), "shard model-00002-of-00003.safetensors is missing");

  TempDir mixed;
  shard(mixed.file("model-00001-of-00002.safetensors"), {{"a", DType::U8, {1}}});
  shard(mixed.file("model-00002-of-000002.safetensors"), {{"b", DType::U8, {1}}});
  EXPECT_FAILS_WITH(Checkpoint::open(mixed.path()), mixed.path(), "shard files disagree on the total");
}

TEST(Checkpoint, ShardsDisagreeOnTotal) {
  TempDir dir;
  shard(dir.file("model-00001-of-000002.safetensors"), {{"a", DType::U8, {1}}});
  shard(dir.file("model-00002-of-000003.safetensors"), {{"b", DType::U8, {1}}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), dir.path(), "shard files disagree on the total");
}

TEST(Checkpoint, NoSafetensorsInDirectory) {
  TempDir dir;
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), dir.path(), "no safetensors files");
  write_bytes(dir.file("config.json"), "{}");
  write_bytes(dir.file("weights.safetensors"), "");
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), dir.path(), "no safetensors files");
}

TEST(Checkpoint, NotADirectory) {
  TempDir dir;
  EXPECT_FAILS_WITH(Checkpoint::open(dir.file("absent")), dir.file("absent"), "not a directory");
  write_bytes(dir.file("plain"), "x");
  EXPECT_FAILS_WITH(Checkpoint::open(dir.file("plain")), dir.file("plain"), "not a directory");
}

TEST(Checkpoint, MalformedShardIsNamed) {
  TempDir dir;
  shard(dir.file(kS1), {{"a", DType::U8, {1}}});
  write_bytes(dir.file(kS2), raw_safetensors(R"({"bad": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", "x"));
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), dir.file(kS2), "'bad'", "unknown dtype 'Q4'");
}

TEST(Checkpoint, SingleFileBesideShardsIsAmbiguous) {
  TempDir dir;
  two_shards(dir);
  write_patterned_safetensors(dir.file("model.safetensors"), {{"z", DType::U8, {2}}});
  EXPECT_FAILS_WITH(Checkpoint::open(dir.path()), dir.path(), "model.safetensors", "ambiguous");
}
