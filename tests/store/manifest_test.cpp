// store.json: round trip, and every malformed field named with the file.
#include "store/store_manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "util/file.h"

using namespace deltafin;
using deltafin::test::TempDir;
using nlohmann::json;

namespace {

StoreManifest sample() {
  StoreManifest m;
  m.source_dir = "/models/k3";
  m.source_files = {{"config.json", 7006, std::string(64, 'a')}, {"model-00001-of-000002.safetensors", 123456, ""}};
  m.spine_format = SpineFormat::Int8Row;
  m.spine_reason = "requested (--spine int8)";
  m.spine_bytes = 987654321;
  m.spine_files = {{"spine/globals.bin", 8192, std::string(64, 'b')}, {"spine/L000.bin", 4096, std::string(64, 'c')}};
  m.drives = {{"/mnt/a", 3.5e9, "given by --drive-mbps"}, {"/mnt/b", 7.25e9, "probed with O_DIRECT"}};
  m.layers = 3;
  m.moe_layers = {1, 2};
  m.experts = 4;
  m.expert_bytes = 3264;
  m.record = {{"w1.weight_packed", "U8", {32, 48}, 0, 1536}, {"w1.weight_scale", "U8", {32, 3}, 1536, 96},
              {"w2.weight_packed", "U8", {32, 48}, 1632, 1536}, {"w2.weight_scale", "U8", {32, 3}, 3168, 96}};
  m.entries.resize(8);  // MoE layers 1 and 2 x 4 experts
  for (int64_t l = 1; l < 3; ++l)
    for (int64_t e = 0; e < 4; ++e) {
      ExpertEntry& x = m.moe_entry(l, e);
      x.drives = {static_cast<uint16_t>((l + e) % 2)};
      if (l == 2 && e == 3) x.drives.push_back(static_cast<uint16_t>((l + e + 1) % 2));
      for (int i = 0; i < 32; ++i) x.sha256[i] = static_cast<uint8_t>(l * 40 + e * 7 + i);
      x.crc32c = 0xF0000000u + static_cast<uint32_t>(l * 10 + e);
    }
  return m;
}

// Saves the sample, edits its JSON, expects load to fail naming store.json and `needles`.
void expect_bad(const std::function<void(json&)>& edit, std::initializer_list<std::string> needles) {
  TempDir dir;
  save_store_manifest(dir.path(), sample());
  json j = json::parse(read_text_file(dir.file("store.json")));
  edit(j);
  write_file_atomic(dir.file("store.json"), j.dump());
  std::string msg = test::expect_error([&] { load_store_manifest(dir.path()); }, needles);
  EXPECT_NE(msg.find(dir.file("store.json")), std::string::npos) << msg;
}

}  // namespace

// Version 4 records the family, its MoE layers and the record layout; an
// older manifest is a K3 store (MoE layers 1 .. L-1) and stays readable.
TEST(StoreManifest, FamilyMoeLayersAndRecordLayout) {
  TempDir dir;
  StoreManifest m = sample();
  m.family = "qwen3_moe";
  m.moe_layers = {0, 2};  // layer 1 dense (mlp_only_layers)
  m.entries.assign(8, ExpertEntry{});
  for (int64_t l : m.moe_layers)
    for (int64_t e = 0; e < 4; ++e) m.moe_entry(l, e).drives = {0};
  save_store_manifest(dir.path(), m);
  const StoreManifest b = load_store_manifest(dir.path());
  EXPECT_EQ(b.family, "qwen3_moe");
  EXPECT_EQ(b.moe_layers, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(b.is_moe_layer(2));
  EXPECT_FALSE(b.is_moe_layer(1));
  ASSERT_EQ(b.record.size(), 4u);
  EXPECT_EQ(b.record[2].tensor, "w2.weight_packed");
  EXPECT_EQ(b.record[3].offset, 3168u);
  EXPECT_EQ(b.record[1].shape, (std::vector<uint64_t>{32, 3}));

  // A version 3 manifest (no family, no layers list, no record).
  json j = json::parse(read_text_file(dir.file("store.json")));
  save_store_manifest(dir.path(), sample());
  j = json::parse(read_text_file(dir.file("store.json")));
  j["version"] = 3;
  j.erase("family"), j.erase("moe_layers"), j.erase("record");
  write_file_atomic(dir.file("store.json"), j.dump());
  const StoreManifest old = load_store_manifest(dir.path());
  EXPECT_EQ(old.family, "kimi_k3");
  EXPECT_EQ(old.moe_layers, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(old.record.empty());
  // Saved again it keeps its version (it has no layout to add).
  save_store_manifest(dir.path(), old);
  EXPECT_EQ(load_store_manifest(dir.path()).version, 3);
}

TEST(StoreManifest, BadFamilyFieldsAreNamed) {
  expect_bad([](json& j) { j["moe_layers"] = {2, 1}; }, {"'moe_layers[1]'"});
  expect_bad([](json& j) { j["moe_layers"] = {1, 3}; }, {"'moe_layers[1]'", "3"});
  expect_bad([](json& j) { j["moe_layers"] = json::array(); }, {"'moe_layers' is empty"});
  expect_bad([](json& j) { j["record"][1]["offset"] = 1000; }, {"'record[1].offset'"});
  expect_bad([](json& j) { j["record"][3]["bytes"] = 95; }, {"'record[3].bytes' = 95", "U8 of that shape holds 96"});
  expect_bad([](json& j) { j["record"][3]["shape"] = {32, 2}; j["record"][3]["bytes"] = 64; }, {"'record'", "3232", "3264"});
  expect_bad([](json& j) { j["record"][0]["dtype"] = "INT4"; }, {"'record[0].dtype'", "INT4"});
  // Version 3 manifests are K3 stores: a family there is a mistake, not a hint.
  expect_bad([](json& j) { j["version"] = 3; j.erase("moe_layers"); j.erase("record"); }, {"unknown field 'family'", "version 3"});
  expect_bad([](json& j) { j["record"][0]["stride"] = 2; }, {"stride"});
  expect_bad([](json& j) { j.erase("family"); }, {"'family'"});
}

TEST(StoreManifest, RoundTrip) {
  TempDir dir;
  const StoreManifest m = sample();
  save_store_manifest(dir.path(), m);
  const StoreManifest b = load_store_manifest(dir.path());
  EXPECT_EQ(b.version, kStoreManifestVersion);
  EXPECT_EQ(b.source_dir, m.source_dir);
  ASSERT_EQ(b.source_files.size(), 2u);
  EXPECT_EQ(b.source_files[0].name, "config.json");
  EXPECT_EQ(b.source_files[0].bytes, 7006u);
  EXPECT_EQ(b.source_files[0].sha256, std::string(64, 'a'));
  EXPECT_EQ(b.source_files[1].sha256, "");
  EXPECT_EQ(b.spine_format, SpineFormat::Int8Row);
  EXPECT_EQ(b.spine_reason, m.spine_reason);
  EXPECT_EQ(b.spine_bytes, m.spine_bytes);
  ASSERT_EQ(b.spine_files.size(), 2u);
  EXPECT_EQ(b.spine_files[1].path, "spine/L000.bin");
  EXPECT_EQ(b.spine_files[1].bytes, 4096u);
  ASSERT_EQ(b.drives.size(), 2u);
  EXPECT_EQ(b.drives[1].path, "/mnt/b");
  EXPECT_EQ(b.drives[1].read_bytes_per_s, 7.25e9);
  EXPECT_EQ(b.drives[1].bandwidth_source, "probed with O_DIRECT");
  EXPECT_EQ(b.layers, 3);
  EXPECT_EQ(b.experts, 4);
  EXPECT_EQ(b.expert_bytes, 3264u);
  ASSERT_EQ(b.entries.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(b.entries[i].drives, m.entries[i].drives) << i;
    EXPECT_EQ(b.entries[i].sha256, m.entries[i].sha256) << i;
    EXPECT_EQ(b.entries[i].crc32c, m.entries[i].crc32c) << i;
  }
  EXPECT_TRUE(b.entry(0, 3).drives.empty());
  EXPECT_EQ(b.entry(2, 3).drives.size(), 2u);
  EXPECT_EQ(b.expert_path(1, 2, 3), "/mnt/b/deltafin-experts/L002/E003.bin");
  EXPECT_EQ(expert_relative_path(91, 895), "deltafin-experts/L091/E895.bin");
  EXPECT_FAILS_WITH(b.entry(3, 0), "layer 3");
  EXPECT_FAILS_WITH(b.expert_path(2, 1, 0), "drive 2");
  // The hash is hex in the file.
  json j = json::parse(read_text_file(dir.file("store.json")));
  EXPECT_EQ(j["placement"][0]["sha256"], "28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f4041424344454647");
  EXPECT_EQ(j["placement"][0]["layer"], 1);
}

TEST(StoreManifest, BadFieldsAreNamed) {
  expect_bad([](json& j) { j["version"] = 5; }, {"'version'", "5"});
  expect_bad([](json& j) { j["version"] = 0; }, {"'version'", "0"});
  expect_bad([](json& j) { j.erase("drives"); }, {"'drives'", "missing"});
  expect_bad([](json& j) { j["format"] = "other"; }, {"'format'"});
  expect_bad([](json& j) { j["surprise"] = 1; }, {"unknown field 'surprise'"});
  expect_bad([](json& j) { j["source"]["files"][0]["bytes"] = -1; }, {"'source.files[0].bytes'"});
  expect_bad([](json& j) { j["source"]["files"][0]["sha256"] = "xyz"; }, {"'source.files[0].sha256'"});
  expect_bad([](json& j) { j["spine"]["format"] = "fp8"; }, {"'spine.format'", "fp8"});
  expect_bad([](json& j) { j["spine"]["files"][1]["path"] = "../L000.bin"; }, {"'spine.files[1].path'"});
  expect_bad([](json& j) { j["drives"][0]["path"] = "relative/dir"; }, {"'drives[0].path'", "absolute"});
  expect_bad([](json& j) { j["drives"][1]["read_bytes_per_s"] = 0; }, {"'drives[1].read_bytes_per_s'"});
  expect_bad([](json& j) { j["drives"][1]["path"] = "/mnt/a"; }, {"'drives[1].path'", "twice"});
  expect_bad([](json& j) { j["placement"][3]["sha256"] = std::string(63, '0'); }, {"'placement[3].sha256'"});
  expect_bad([](json& j) { j["placement"][3]["sha256"] = std::string(64, 'A'); }, {"'placement[3].sha256'"});
  expect_bad([](json& j) { j["placement"][2]["drives"] = {5}; }, {"'placement[2].drives[0]'", "2 drives"});
  expect_bad([](json& j) { j["placement"][2]["drives"] = {1, 1}; }, {"'placement[2].drives'", "twice"});
  expect_bad([](json& j) { j["placement"][2]["drives"] = json::array(); }, {"'placement[2].drives'", "empty"});
  expect_bad([](json& j) { j["placement"][2]["crc32c"] = 4294967296ull; }, {"'placement[2].crc32c'"});
  expect_bad([](json& j) { j["placement"][5]["expert"] = 2; }, {"'placement[5]'", "expected (layer 2, expert 1)"});
  expect_bad([](json& j) { j["placement"].erase(7); }, {"'placement'", "7 entries"});
  expect_bad([](json& j) { j["placement"][0]["extra"] = true; }, {"unknown field 'placement[0].extra'"});
  expect_bad([](json& j) { j["layers"] = "3"; }, {"'layers'"});
  expect_bad([](json& j) { j["expert_bytes"] = 0; }, {"'expert_bytes'"});
}

TEST(StoreManifest, MissingOrUnparsableFile) {
  TempDir dir;
  EXPECT_FAILS_WITH(load_store_manifest(dir.path()), dir.file("store.json"));
  write_file_atomic(dir.file("store.json"), "{\"format\": ");
  EXPECT_FAILS_WITH(load_store_manifest(dir.path()), dir.file("store.json"), "JSON");
}

TEST(StoreManifest, SpineFormatNames) {
  EXPECT_STREQ(spine_format_name(SpineFormat::BF16), "bf16");
  EXPECT_STREQ(spine_format_name(SpineFormat::Int8Row), "int8-row");
  EXPECT_EQ(parse_spine_format("int8-row"), SpineFormat::Int8Row);
  EXPECT_FAILS_WITH(parse_spine_format("int4"), "int4");
}

TEST(StoreManifest, K3Scale) {
  // 93 layers x 896 experts, 82,432 placements over 4 drives (~0.5 s to save
  // and load in a release build). Sanitizer builds check the same code at
  // 1/14 of the scale: they test correctness there, not speed.
#if defined(__SANITIZE_ADDRESS__)
  const int64_t E = 64;
#else
  const int64_t E = 896;
#endif
  TempDir dir;
  StoreManifest m = sample();
  m.layers = 93;
  m.moe_layers.clear();
  for (int64_t l = 1; l < 93; ++l) m.moe_layers.push_back(l);
  m.experts = E;
  m.drives = {{"/d0", 7e9, "x"}, {"/d1", 7e9, "x"}, {"/d2", 7e9, "x"}, {"/d3", 7e9, "x"}};
  m.entries.assign(92 * E, ExpertEntry{});
  for (int64_t i = 0; i < 92 * E; ++i) {
    m.entries[i].drives = {static_cast<uint16_t>(i % 4)};
    m.entries[i].sha256[0] = static_cast<uint8_t>(i);
    m.entries[i].crc32c = static_cast<uint32_t>(i * 2654435761u);
  }
  save_store_manifest(dir.path(), m);
  const StoreManifest b = load_store_manifest(dir.path());
  ASSERT_EQ(b.entries.size(), m.entries.size());
  EXPECT_EQ(b.entry(92, E - 1).drives, m.entry(92, E - 1).drives);
  EXPECT_EQ(b.entry(92, E - 1).sha256, m.entry(92, E - 1).sha256);
  EXPECT_EQ(b.entry(50, 3).crc32c, m.entry(50, 3).crc32c);
}

namespace {
json remote_section() {
  return {{"url", "http://127.0.0.1:8080/k3"},
          {"checksums", ""},
          {"disk_budget_bytes", 1000000},
          {"shards", {{{"name", "model-00001-of-000002.safetensors"}, {"bytes", 123456}, {"etag", "\"abc\""}, {"sha256", ""}}}}};
}
}  // namespace

TEST(StoreManifest, RemoteSectionRoundTripAndUnknownHashes) {
  TempDir dir;
  StoreManifest m = sample();
  m.remote = RemoteSource{"https://mirror.example/k3", "SHA256SUMS",
                          {{"model-00001-of-000002.safetensors", 123456, "\"e1\"", std::string(64, 'd')}}, 5000};
  m.moe_entry(1, 2).hash_known = false;  // not fetched yet: written as "" and 0
  save_store_manifest(dir.path(), m);
  const json j = json::parse(read_text_file(dir.file("store.json")));
  EXPECT_EQ(j["placement"][2]["sha256"], "");
  EXPECT_EQ(j["placement"][2]["crc32c"], 0);
  const StoreManifest b = load_store_manifest(dir.path());
  ASSERT_TRUE(b.remote.has_value());
  EXPECT_EQ(b.remote->url, "https://mirror.example/k3");
  EXPECT_EQ(b.remote->checksums, "SHA256SUMS");
  EXPECT_EQ(b.remote->disk_budget_bytes, 5000u);
  ASSERT_EQ(b.remote->shards.size(), 1u);
  EXPECT_EQ(b.remote->shards[0].etag, "\"e1\"");
  EXPECT_EQ(b.remote->shards[0].sha256, std::string(64, 'd'));
  EXPECT_FALSE(b.entry(1, 2).hash_known);
  EXPECT_TRUE(b.entry(1, 3).hash_known);
  EXPECT_EQ(b.entry(1, 3).sha256, m.entry(1, 3).sha256);
}

TEST(StoreManifest, BadRemoteFieldsAreNamed) {
  expect_bad([](json& j) { j["remote"] = remote_section(); j["remote"]["url"] = "ftp://x"; }, {"'remote.url'", "http"});
  expect_bad([](json& j) { j["remote"] = remote_section(); j["remote"]["url"] = "http://x/"; }, {"'remote.url'", "'/'"});
  expect_bad([](json& j) { j["remote"] = remote_section(); j["remote"]["shards"] = json::array(); }, {"'remote.shards'", "empty"});
  expect_bad([](json& j) { j["remote"] = remote_section(); j["remote"]["shards"][0]["name"] = "../x"; },
             {"'remote.shards[0].name'"});
  expect_bad([](json& j) { j["remote"] = remote_section(); j["remote"]["shards"][0]["sha256"] = "xyz"; },
             {"'remote.shards[0].sha256'"});
  expect_bad([](json& j) { j["remote"] = remote_section(); j["remote"]["extra"] = 1; }, {"unknown field 'remote.extra'"});
  expect_bad([](json& j) { j["remote"] = remote_section(); j["remote"].erase("disk_budget_bytes"); },
             {"'remote.disk_budget_bytes'", "missing"});
  // Without a mirror every expert's hash must be there.
  expect_bad([](json& j) { j["placement"][0]["sha256"] = ""; }, {"'placement[0].sha256'"});
  // Not fetched yet: the CRC must be 0 too.
  expect_bad([](json& j) { j["remote"] = remote_section(); j["placement"][0]["sha256"] = ""; j["placement"][0]["crc32c"] = 5; },
             {"'placement[0].crc32c'", "expected 0"});
  // A version-1 manifest has no remote section.
  expect_bad(
      [](json& j) {
        j["version"] = 1;
        for (const char* v4 : {"family", "moe_layers", "record"}) j.erase(v4);
        j["remote"] = remote_section();
      },
      {"unknown field 'remote'"});
}

// `layers` is a count the file claims; only the MoE layers' placements back
// it. The entries were a [layers x experts] table, so a 3 KB store.json
// saying 1,048,576 layers made the reader allocate 369 MB before anything
// checked it (found with fuzz_store_manifest's harness). Now only the listed
// placements are held.
TEST(StoreManifest, AClaimedLayerCountSizesNoTable) {
  TempDir dir;
  save_store_manifest(dir.path(), sample());
  json j = json::parse(read_text_file(dir.file("store.json")));
  j["layers"] = 1 << 20;
  write_file_atomic(dir.file("store.json"), j.dump());
  StoreManifest b = load_store_manifest(dir.path());
  EXPECT_EQ(b.layers, 1 << 20);
  EXPECT_EQ(b.entries.size(), 8u) << "one entry per placement of MoE layers 1 and 2";
  EXPECT_TRUE(b.entry((1 << 20) - 1, 3).drives.empty());  // a dense layer reads as empty
  EXPECT_EQ(b.entry(2, 3).drives.size(), 2u);
  EXPECT_EQ(&b.moe_entry(2, 3), &b.entries[7]);
  EXPECT_FAILS_WITH(b.moe_entry(0, 0), "layer 0 is dense");
  EXPECT_FAILS_WITH(b.entry(1 << 20, 0), "layer 1048576");
}
