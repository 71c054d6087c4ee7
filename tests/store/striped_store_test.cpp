// Striped stores (setup --layout striped): where each record is cut
// (stripe_offsets_for, against hand-computed shares), the version-3 manifest
// (round trip, every malformed stripe field named), setup (the stripe files
// and nothing else, their bytes the record's, auto's choice and reason, the
// refusals, rerun and interrupted runs) and doctor on a striped store.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "store/doctor_checks.h"
#include "model/kimi_k3/tensors.h"
#include "model/kimi_k3/generator.h"
#include "store/doctor.h"
#include "store/placement.h"
#include "store/setup.h"
#include "store/store_fixture.h"
#include "store/store_manifest.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"
#include "util/sha256.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;
using nlohmann::json;

// A namespace of its own: the test binaries compile in unity batches
// (tests/CMakeLists.txt), where file-local names of two files would meet.
namespace striped_store_test {
namespace {

constexpr uint64_t kPage = 4096;
using Offsets = std::vector<uint64_t>;

// ------------------------------------------------------------------ checkpoints

// The tiny preset with wider experts: latent 128 x moe_intermediate 128 gives
// 128 * 128 * 51 / 32 = 26112-byte records, 7 pages (the last one partial), so
// they stripe over 2 and 3 drives. 10 layers (9 MoE) x 16 experts = 144 records.
constexpr uint64_t kWideRecord = 26112;
constexpr int64_t kLayers = 10, kExperts = 16, kMoeExperts = (kLayers - 1) * kExperts;

std::string generate(const std::string& dir, K3Dims dims) {
  GenerateOptions o;
  o.out_dir = dir;
  o.seed = 11;
  o.dims = std::move(dims);
  o.progress = false;
  generate_k3_checkpoint(o);
  return dir;
}

const std::string& wide_checkpoint_dir() {
  static TempDir dir;
  static const std::string path = [] {
    K3Dims d = preset_dims("tiny");
    d.latent = 128;
    d.moe_intermediate = 128;
    return generate(dir.file("wide"), d);
  }();
  return path;
}

const K3Checkpoint& wide_checkpoint() {
  static const K3Checkpoint k = load_k3_checkpoint(wide_checkpoint_dir());
  return k;
}

// Records of 1024 x 1536 x 51 / 32 = 2506752 bytes (2.39 MiB, exactly 612
// pages) in one MoE layer of 4 experts: over 2 drives that is >= 1 MiB per
// drive (auto stripes), over 3 drives it is not (auto keeps whole files).
constexpr uint64_t kBigRecord = 2506752;

const std::string& big_checkpoint_dir() {
  static TempDir dir;
  static const std::string path = [] {
    K3Dims d = preset_dims("tiny");
    d.layers = 2;
    d.full_attn_layers = default_full_attn_layers(2);
    d.experts = 4;
    d.top_k = 2;
    d.latent = 1024;
    d.moe_intermediate = 1536;
    return generate(dir.file("big"), d);
  }();
  return path;
}

SetupOptions options_for(const std::string& ckpt, const std::string& root, int drives, const std::string& layout) {
  SetupOptions o = tiny_setup_options(root, make_drives(root, drives));
  o.from = ckpt;
  o.layout = layout;
  return o;
}

// Every regular file under dir (recursively), as paths relative to dir.
std::set<std::string> files_under(const std::string& dir) {
  std::set<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
  return out;
}

using test::all;
using test::expect_one_problem;

}  // namespace

// ------------------------------------------------------------------ stripe_offsets_for

TEST(StripeOffsets, EqualDrivesGetPagesDifferingByOneExtraToTheLowerIndex) {
  // 10 pages over 3: 3 each, the 10th page to drive 0.
  EXPECT_EQ(stripe_offsets_for(40960, {2e9, 2e9, 2e9}), (Offsets{0, 16384, 28672, 40960}));
  // 11 pages over 3: 3 each, the two left to drives 0 and 1.
  EXPECT_EQ(stripe_offsets_for(45056, {2e9, 2e9, 2e9}), (Offsets{0, 16384, 32768, 45056}));
  // 12 over 3 and 10 over 2 divide evenly.
  EXPECT_EQ(stripe_offsets_for(49152, {7e9, 7e9, 7e9}), (Offsets{0, 16384, 32768, 49152}));
  EXPECT_EQ(stripe_offsets_for(40960, {1e9, 1e9}), (Offsets{0, 20480, 40960}));
  // As many pages as drives: one each.
  EXPECT_EQ(stripe_offsets_for(16384, {1e9, 1e9, 1e9, 1e9}), (Offsets{0, 4096, 8192, 12288, 16384}));
  // One drive: the whole record.
  EXPECT_EQ(stripe_offsets_for(40000, {1e9}), (Offsets{0, 40000}));
}

TEST(StripeOffsets, ARecordNotAWholeNumberOfPagesEndsAtItsSize) {
  // 40000 bytes = 9 whole pages + 3136 bytes = 10 pages: cut as 10 pages, the last stripe short.
  EXPECT_EQ(stripe_offsets_for(40000, {2e9, 2e9, 2e9}), (Offsets{0, 16384, 28672, 40000}));
  // 40961 bytes = 11 pages (the last holds one byte).
  EXPECT_EQ(stripe_offsets_for(40961, {2e9, 2e9, 2e9}), (Offsets{0, 16384, 32768, 40961}));
  // The small preset's 19584-byte record (5 pages) over 2 and 3 drives.
  EXPECT_EQ(stripe_offsets_for(19584, {1e9, 1e9}), (Offsets{0, 12288, 19584}));
  EXPECT_EQ(stripe_offsets_for(19584, {1e9, 1e9, 1e9}), (Offsets{0, 8192, 16384, 19584}));
  // The real K3 record (17,547,264 bytes = 4284 pages) over 4 equal drives: 1071 pages each.
  EXPECT_EQ(stripe_offsets_for(17547264, {7e9, 7e9, 7e9, 7e9}),
            (Offsets{0, 1071 * kPage, 2142 * kPage, 3213 * kPage, 17547264}));
}

TEST(StripeOffsets, UnequalDrivesGetPagesInProportionToBandwidth) {
  // 2:1, 9 pages: exactly 6 and 3.
  EXPECT_EQ(stripe_offsets_for(36864, {2e9, 1e9}), (Offsets{0, 24576, 36864}));
  // 2:1, 10 pages: 6.67 and 3.33 -> 6 + 3, the 10th page to the larger remainder (drive 0).
  EXPECT_EQ(stripe_offsets_for(40960, {2e9, 1e9}), (Offsets{0, 28672, 40960}));
  // 1:2, 10 pages: 3.33 and 6.67 -> 3 + 6, the 10th page to drive 1.
  EXPECT_EQ(stripe_offsets_for(40960, {1e9, 2e9}), (Offsets{0, 12288, 40960}));
  // 3:2:1, 10 pages: 5, 3.33, 1.67 -> 5 + 3 + 1, the last page to drive 2 (remainder .67 > .33).
  EXPECT_EQ(stripe_offsets_for(40960, {3e9, 2e9, 1e9}), (Offsets{0, 20480, 32768, 40960}));
  // 3:2:1, 12 pages: exactly 6, 4, 2.
  EXPECT_EQ(stripe_offsets_for(49152, {3e9, 2e9, 1e9}), (Offsets{0, 24576, 40960, 49152}));
  // 2:1:1 (the two 1s form one group), 5 pages: 2.5, 1.25, 1.25 -> 2 + 1 + 1, the 5th to drive 0.
  EXPECT_EQ(stripe_offsets_for(19584, {2e9, 1e9, 1e9}), (Offsets{0, 12288, 16384, 19584}));
}

TEST(StripeOffsets, DrivesWithin15PercentCountAsEqual) {
  // 1000 vs 1140 MB/s (14% apart): both weigh 1070, so 20 pages split 10 + 10
  // (by raw bandwidth it would be 9.35 / 10.65 -> 9 + 11).
  EXPECT_EQ(stripe_offsets_for(81920, {1000e6, 1140e6}), (Offsets{0, 40960, 81920}));
  EXPECT_EQ(stripe_offsets_for(81920, {1140e6, 1000e6}), (Offsets{0, 40960, 81920}));
  // 1000 vs 1160 MB/s (16% apart) are different drives: 9.26 / 10.74 -> 9 + 11.
  EXPECT_EQ(stripe_offsets_for(81920, {1000e6, 1160e6}), (Offsets{0, 36864, 81920}));
  // Three drives, two alike (1000, 1100) and one twice as fast (2200): weights
  // 1050, 1050, 2200; 13 pages -> 3.15, 3.15, 6.70 -> 3 + 3 + 6, the 13th to drive 2.
  EXPECT_EQ(stripe_offsets_for(13 * kPage, {1000e6, 1100e6, 2200e6}), (Offsets{0, 12288, 24576, 53248}));
}

TEST(StripeOffsetsErrors, FewerPagesThanDrivesAndBadBandwidthsAreNamed) {
  // 8192 bytes = 2 pages for 3 drives.
  EXPECT_FAILS_WITH(stripe_offsets_for(8192, {1e9, 1e9, 1e9}), "8192-byte", "2 pages", "3 drives");
  // The tiny preset's 3264-byte record is one page: it cannot be striped over 2.
  EXPECT_FAILS_WITH(stripe_offsets_for(3264, {1e9, 1e9}), "3264-byte", "1 pages", "2 drives");
  EXPECT_FAILS_WITH(stripe_offsets_for(0, {1e9, 1e9}), "0-byte", "0 pages");
  // Just enough pages: fine.
  EXPECT_EQ(stripe_offsets_for(8193, {1e9, 1e9, 1e9}), (Offsets{0, 4096, 8192, 8193}));
  // A drive so slow its share rounds to no page at all.
  EXPECT_FAILS_WITH(stripe_offsets_for(8192, {1e9, 1e6}), "drive 1", "no page", "8192-byte");
  EXPECT_FAILS_WITH(stripe_offsets_for(8192, {}), "no drives");
  EXPECT_FAILS_WITH(stripe_offsets_for(8192, {1e9, 0}), "drive 1", "bandwidth");
  EXPECT_FAILS_WITH(stripe_offsets_for(8192, {-1, 1e9}), "drive 0", "bandwidth");
}

// ------------------------------------------------------------------ manifest version 3

namespace {

// A striped manifest: 3 drives, 26112-byte records cut 12288 / 8192 / 5632.
StoreManifest striped_sample() {
  StoreManifest m;
  m.source_dir = "/models/k3";
  m.source_files = {{"config.json", 7006, std::string(64, 'a')}};
  m.spine_format = SpineFormat::BF16;
  m.spine_reason = "requested (--spine bf16)";
  m.spine_bytes = 4096;
  m.spine_files = {{"spine/L000.bin", 4096, std::string(64, 'c')}};
  m.drives = {{"/mnt/a", 3e9, "x"}, {"/mnt/b", 3e9, "x"}, {"/mnt/c", 3e9, "x"}};
  m.layers = 3;
  m.moe_layers = {1, 2};
  m.experts = 4;
  m.expert_bytes = kWideRecord;
  m.stripe_offsets = {0, 12288, 20480, kWideRecord};
  m.entries.resize(8);
  for (int64_t l = 1; l < 3; ++l)
    for (int64_t e = 0; e < 4; ++e) {
      ExpertEntry& x = m.moe_entry(l, e);
      x.drives = {0, 1, 2};
      for (int i = 0; i < 32; ++i) x.sha256[i] = static_cast<uint8_t>(l * 50 + e * 9 + i);
      x.crc32c = 0xA0000000u + static_cast<uint32_t>(l * 10 + e);
      for (uint32_t d = 0; d < 3; ++d) x.stripe_crc32c.push_back(0xF0000000u + static_cast<uint32_t>(l * 100 + e * 10) + d);
    }
  return m;
}

// Saves `m`, edits its JSON, expects load to fail naming store.json and every needle.
void expect_bad(const StoreManifest& m, const std::function<void(json&)>& edit, std::initializer_list<std::string> needles) {
  TempDir dir;
  save_store_manifest(dir.path(), m);
  json j = json::parse(read_text_file(dir.file("store.json")));
  edit(j);
  write_file_atomic(dir.file("store.json"), j.dump());
  const std::string msg = expect_error([&] { load_store_manifest(dir.path()); }, needles);
  EXPECT_NE(msg.find(dir.file("store.json")), std::string::npos) << msg;
}

void expect_bad(const std::function<void(json&)>& edit, std::initializer_list<std::string> needles) {
  expect_bad(striped_sample(), edit, needles);
}

}  // namespace

TEST(StripedManifest, RoundTripKeepsOffsetsAndStripeCrcs) {
  TempDir dir;
  const StoreManifest m = striped_sample();
  save_store_manifest(dir.path(), m);
  const std::string text = read_text_file(dir.file("store.json"));
  const StoreManifest b = load_store_manifest(dir.path());
  EXPECT_EQ(b.version, 3);
  EXPECT_TRUE(b.striped());
  EXPECT_EQ(b.stripe_offsets, (Offsets{0, 12288, 20480, 26112}));
  ASSERT_EQ(b.entries.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(b.entries[i].drives, m.entries[i].drives) << i;
    EXPECT_EQ(b.entries[i].sha256, m.entries[i].sha256) << i;
    EXPECT_EQ(b.entries[i].crc32c, m.entries[i].crc32c) << i;
    EXPECT_EQ(b.entries[i].stripe_crc32c, m.entries[i].stripe_crc32c) << i;
  }
  EXPECT_EQ(b.entry(2, 3).stripe_crc32c, (std::vector<uint32_t>{0xF0000000u + 230, 0xF0000000u + 231, 0xF0000000u + 232}));
  EXPECT_TRUE(b.entry(0, 1).stripe_crc32c.empty()) << "layer 0 is dense";
  // Saving what was loaded writes the same file.
  TempDir again;
  save_store_manifest(again.path(), b);
  EXPECT_EQ(read_text_file(again.file("store.json")), text);

  // In the JSON: top-level offsets, one CRC per drive per expert.
  const json j = json::parse(text);
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["stripe_offsets"], json({0, 12288, 20480, 26112}));
  EXPECT_EQ(j["placement"][7]["stripe_crc32c"], json({0xF0000000u + 230, 0xF0000000u + 231, 0xF0000000u + 232}));
  EXPECT_EQ(j["placement"][7]["drives"], json({0, 1, 2}));

  // Stripe sizes, names and paths.
  EXPECT_EQ(b.stripe_bytes(0), 12288u);
  EXPECT_EQ(b.stripe_bytes(1), 8192u);
  EXPECT_EQ(b.stripe_bytes(2), 5632u);
  EXPECT_EQ(b.bytes_on_drive(2), 5632u);
  EXPECT_EQ(b.stripe_path(2, 1, 3), "/mnt/c/deltafin-experts/L001/E003.s2of3.bin");
  EXPECT_EQ(b.file_on_drive(0, 2, 0), "/mnt/a/deltafin-experts/L002/E000.s0of3.bin");
  EXPECT_EQ(stripe_relative_path(91, 895, 3, 4), "deltafin-experts/L091/E895.s3of4.bin");
  EXPECT_FAILS_WITH(b.stripe_bytes(3), "no stripe 3", "3 stripes");
  EXPECT_FAILS_WITH(b.stripe_bytes(-1), "no stripe -1");
  EXPECT_FAILS_WITH(b.stripe_path(3, 1, 0), "no stripe 3");

  // A whole store has no stripes, and says so.
  StoreManifest w = m;
  w.stripe_offsets.clear();
  for (ExpertEntry& e : w.entries) e.stripe_crc32c.clear();
  EXPECT_FALSE(w.striped());
  EXPECT_EQ(w.bytes_on_drive(1), kWideRecord);
  EXPECT_EQ(w.file_on_drive(1, 1, 2), "/mnt/b/deltafin-experts/L001/E002.bin");
  EXPECT_FAILS_WITH(w.stripe_bytes(0), "no stripe 0", "not striped");
  TempDir whole;
  save_store_manifest(whole.path(), w);
  const json wj = json::parse(read_text_file(whole.file("store.json")));
  EXPECT_FALSE(wj.contains("stripe_offsets"));
  EXPECT_FALSE(wj["placement"][0].contains("stripe_crc32c"));
  EXPECT_FALSE(load_store_manifest(whole.path()).striped());
}

TEST(StripedManifest, SaveRefusesOffsetsThatDoNotMatchTheDrives) {
  TempDir dir;
  StoreManifest m = striped_sample();
  m.stripe_offsets = {0, 12288, kWideRecord};
  EXPECT_FAILS_WITH(save_store_manifest(dir.path(), m), "save_store_manifest", "3 stripe offsets for 3 drives");
  EXPECT_FALSE(file_exists(dir.file("store.json")));
}

TEST(StripedManifest, BadOffsetsAreNamed) {
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 12288, 26112}; }, {"'stripe_offsets'", "3 entries", "drives + 1 = 4"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 4096, 8192, 12288, 26112}; }, {"'stripe_offsets'", "5 entries"});
  expect_bad([](json& j) { j["stripe_offsets"] = {4096, 12288, 20480, 26112}; }, {"'stripe_offsets[0]' = 4096", "start at 0"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 12288, 12288, 26112}; }, {"'stripe_offsets[2]' = 12288", "rise"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 20480, 12288, 26112}; }, {"'stripe_offsets[2]' = 12288"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 12288, 20000, 26112}; }, {"'stripe_offsets[2]' = 20000", "4096"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 12300, 20480, 26112}; }, {"'stripe_offsets[1]' = 12300"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 12288, 20480, 26000}; },
             {"'stripe_offsets[3]' = 26000", "expert_bytes (26112)"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 12288, 20480, 28672}; }, {"'stripe_offsets[3]' = 28672", "expert_bytes"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, 12288, 28672, 26112}; }, {"'stripe_offsets[3]' = 26112"});
  expect_bad([](json& j) { j["stripe_offsets"] = {0, "12288", 20480, 26112}; }, {"stripe_offsets[1]"});
  expect_bad([](json& j) { j["stripe_offsets"] = 0; }, {"'stripe_offsets'"});
}

TEST(StripedManifest, BadStripeEntriesAreNamed) {
  expect_bad([](json& j) { j["placement"][2]["stripe_crc32c"] = {1, 2}; },
             {"'placement[2].stripe_crc32c'", "2 entries", "one per drive = 3"});
  expect_bad([](json& j) { j["placement"][2]["stripe_crc32c"] = {1, 2, 3, 4}; }, {"'placement[2].stripe_crc32c'", "4 entries"});
  expect_bad([](json& j) { j["placement"][4].erase("stripe_crc32c"); }, {"'placement[4].stripe_crc32c'", "missing"});
  expect_bad([](json& j) { j["placement"][1]["stripe_crc32c"][2] = 4294967296ull; },
             {"'placement[1].stripe_crc32c[2]'", "32 bits"});
  expect_bad([](json& j) { j["placement"][1]["stripe_crc32c"][0] = -1; }, {"placement[1].stripe_crc32c[0]"});
  // A striped expert is on every drive, listed in drive order.
  expect_bad([](json& j) { j["placement"][3]["drives"] = {1, 0, 2}; }, {"'placement[3].drives[0]' = 1", "drive order"});
  expect_bad([](json& j) { j["placement"][3]["drives"] = {0, 2, 1}; }, {"'placement[3].drives[1]' = 2", "drive order"});
  expect_bad([](json& j) { j["placement"][3]["drives"] = {0, 1}; }, {"'placement[3].drives'", "every drive (3)", "not 2"});
  expect_bad([](json& j) { j["placement"][3]["drives"] = {2}; }, {"'placement[3].drives'", "not 1"});
}

TEST(StripedManifest, StripesOnlyInVersion3AndNeverWithAMirror) {
  expect_bad([](json& j) { j["version"] = 2; }, {"unknown field 'stripe_offsets'", "version 2"});
  expect_bad([](json& j) { j["version"] = 1; }, {"unknown field 'stripe_offsets'", "version 1"});
  expect_bad([](json& j) { j["version"] = 5; }, {"'version' is 5", "versions 1 to 4"});
  expect_bad(
      [](json& j) {
        j["remote"] = {{"url", "http://127.0.0.1:8080/k3"},
                       {"checksums", ""},
                       {"disk_budget_bytes", 0},
                       {"shards", {{{"name", "model.safetensors"}, {"bytes", 1}, {"etag", "\"a\""}, {"sha256", ""}}}}};
      },
      {"'stripe_offsets'", "'remote'", "cannot be striped"});
  // A whole store's experts have no stripe CRCs: an unknown field there.
  StoreManifest whole = striped_sample();
  whole.stripe_offsets.clear();
  for (ExpertEntry& e : whole.entries) e.stripe_crc32c.clear();
  expect_bad(whole, [](json& j) { j["placement"][0]["stripe_crc32c"] = {1, 2, 3}; },
             {"unknown field 'placement[0].stripe_crc32c'"});
  // Versions 1 and 2 of a whole store still load.
  for (int v : {1, 2}) {
    TempDir dir;
    save_store_manifest(dir.path(), whole);
    json j = json::parse(read_text_file(dir.file("store.json")));
    j["version"] = v;
    write_file_atomic(dir.file("store.json"), j.dump());
    EXPECT_EQ(load_store_manifest(dir.path()).version, v);
  }
}

// ------------------------------------------------------------------ setup

namespace {

// Checks a striped store of the wide checkpoint over `n` drives cut at `want`:
// exactly the stripe files, each holding its slice of the released record.
void expect_striped_store(const SetupOptions& o, size_t n, const Offsets& want) {
  const K3Checkpoint& k = wide_checkpoint();
  const StoreManifest m = load_store_manifest(o.store);
  ASSERT_EQ(m.expert_bytes, kWideRecord);
  ASSERT_EQ(k3_expert_record_bytes(k.config), kWideRecord);
  EXPECT_EQ(m.version, kStoreManifestVersion);
  EXPECT_EQ(m.family, "kimi_k3");
  // The record's layout: K3's six MXFP4 tensors, back to back, filling the record.
  ASSERT_EQ(m.record.size(), 6u);
  EXPECT_EQ(m.record[0].tensor, "w1.weight_packed");
  EXPECT_EQ(m.record.back().offset + m.record.back().bytes, kWideRecord);
  ASSERT_TRUE(m.striped());
  ASSERT_EQ(m.drives.size(), n);
  EXPECT_EQ(m.stripe_offsets, want);
  std::vector<uint16_t> every(n);
  for (size_t d = 0; d < n; ++d) every[d] = static_cast<uint16_t>(d);
  std::vector<std::set<std::string>> expected(n);
  for (int64_t l = 1; l < kLayers; ++l)
    for (int64_t e = 0; e < kExperts; ++e) {
      const ExpertEntry& x = m.entry(l, e);
      const std::vector<uint8_t> record = k.read_expert_record(l, e);
      ASSERT_EQ(record.size(), kWideRecord);
      EXPECT_EQ(x.drives, every) << l << "/" << e;
      EXPECT_EQ(x.sha256, sha256(record.data(), record.size())) << l << "/" << e;
      EXPECT_EQ(x.crc32c, crc32c_portable(record.data(), record.size())) << l << "/" << e;
      ASSERT_EQ(x.stripe_crc32c.size(), n);
      for (size_t d = 0; d < n; ++d) {
        char name[96];
        std::snprintf(name, sizeof name, "deltafin-experts/L%03d/E%03d.s%dof%d.bin", static_cast<int>(l),
                      static_cast<int>(e), static_cast<int>(d), static_cast<int>(n));
        expected[d].insert(name);
        const std::string path = o.drives[d] + "/" + name;
        const std::string bytes = read_all(path);
        const uint64_t len = want[d + 1] - want[d];
        ASSERT_EQ(bytes.size(), len) << path;
        EXPECT_EQ(std::memcmp(bytes.data(), record.data() + want[d], len), 0) << path;
        EXPECT_EQ(x.stripe_crc32c[d], crc32c_portable(record.data() + want[d], len)) << path;
      }
    }
  for (size_t d = 0; d < n; ++d) EXPECT_EQ(files_under(o.drives[d]), expected[d]) << "drive " << d << ": stripes only";
  for (int64_t e = 0; e < kExperts; ++e) EXPECT_TRUE(m.entry(0, e).drives.empty()) << "layer 0 is dense";
}

}  // namespace

TEST(StripedSetup, WritesOneStripePerDriveAndNoWholeFiles) {
  // 7 pages over 2 drives: 4 + 3; over 3 drives: 3 + 2 + 2 (26112 = 6 pages + 1536 bytes).
  const std::vector<std::pair<int, Offsets>> cases = {{2, {0, 16384, 26112}}, {3, {0, 12288, 20480, 26112}}};
  for (const auto& [n, want] : cases) {
    SCOPED_TRACE(n);
    TempDir root;
    SetupOptions o = options_for(wide_checkpoint_dir(), root.path(), n, "striped");
    o.threads = 2;
    const SetupReport r = run_setup(o);
    EXPECT_EQ(r.layout, "striped");
    EXPECT_EQ(r.layout_reason, "requested");
    EXPECT_EQ(r.experts_written, uint64_t(kMoeExperts * n)) << "one file per stripe";
    EXPECT_EQ(r.experts_skipped, 0u);
    uint64_t spine = 0;
    for (const SpineFileEntry& f : load_store_manifest(o.store).spine_files) spine += f.bytes;
    EXPECT_EQ(r.bytes_written, spine + kMoeExperts * kWideRecord) << "each record's bytes once";
    expect_striped_store(o, n, want);
    EXPECT_TRUE(run_doctor(o.store, true).ok());
  }
}

TEST(StripedSetup, StripesConcatenateToTheWholeLayoutFile) {
  TempDir whole_root, striped_root;
  SetupOptions w = options_for(wide_checkpoint_dir(), whole_root.path(), 1, "auto");
  EXPECT_EQ(run_setup(w).layout, "whole");
  SetupOptions s = options_for(wide_checkpoint_dir(), striped_root.path(), 3, "striped");
  run_setup(s);
  const StoreManifest mw = load_store_manifest(w.store), ms = load_store_manifest(s.store);
  EXPECT_FALSE(mw.striped());
  for (int64_t l = 1; l < kLayers; ++l)
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string whole = read_all(w.drives[0] + "/" + expert_relative_path(l, e));
      ASSERT_EQ(whole.size(), kWideRecord);
      std::string joined;
      for (int d = 0; d < 3; ++d) joined += read_all(ms.stripe_path(d, l, e));
      EXPECT_TRUE(joined == whole) << l << "/" << e;
      EXPECT_EQ(ms.entry(l, e).sha256, mw.entry(l, e).sha256);
      EXPECT_EQ(ms.entry(l, e).crc32c, mw.entry(l, e).crc32c);
    }
}

TEST(StripedSetup, StripesFollowTheDriveBandwidths) {
  struct Case {
    std::vector<double> mbps;
    Offsets want;
  };
  // 7 pages. 2:1 -> 4.67 / 2.33 -> 4 + 2, the 7th to drive 0 (5 + 2).
  // 1000 / 1100 (within 15%): equal, 4 + 3 (by raw bandwidth 3.33 / 3.67 -> 3 + 4).
  // 1000 / 1200: 3.18 / 3.82 -> 3 + 3, the 7th to drive 1 (3 + 4).
  const std::vector<Case> cases = {{{2000, 1000}, {0, 20480, 26112}},
                                   {{1000, 1100}, {0, 16384, 26112}},
                                   {{1000, 1200}, {0, 12288, 26112}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.mbps));
    TempDir root;
    SetupOptions o = options_for(wide_checkpoint_dir(), root.path(), 2, "striped");
    o.drive_mbps = c.mbps;
    run_setup(o);
    expect_striped_store(o, 2, c.want);
  }
}

TEST(StripedSetup, AutoStripesOnlyWhereItIsAllowedAndSaysWhy) {
  struct Case {
    const char* what;
    int drives;
    int64_t replicate_hot;
    bool big;
    const char* layout;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"big records over 2 drives", 2, 0, true, "striped", "each expert read uses all 2 drives at once"},
      {"big records over 3 drives (< 1 MiB each)", 3, 0, true, "whole",
       "expert records of 2506752 bytes are under 1 MiB per drive"},
      {"one drive", 1, 0, true, "whole", "one drive"},
      {"--replicate-hot", 2, 2, true, "whole", "--replicate-hot copies whole experts"},
      {"small records over 2 drives", 2, 0, false, "whole", "expert records of 26112 bytes are under 1 MiB per drive"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir root;
    SetupOptions o = options_for(c.big ? big_checkpoint_dir() : wide_checkpoint_dir(), root.path(), c.drives, "auto");
    o.replicate_hot = c.replicate_hot;
    const SetupReport r = run_setup(o);
    EXPECT_EQ(r.layout, c.layout);
    EXPECT_EQ(r.layout_reason, c.reason);
    const StoreManifest m = load_store_manifest(o.store);
    EXPECT_EQ(m.expert_bytes, c.big ? kBigRecord : kWideRecord);
    EXPECT_EQ(m.striped(), std::string(c.layout) == "striped");
    const int64_t moe_layers = m.layers - 1;
    for (int d = 0; d < c.drives; ++d)
      for (const std::string& f : files_under(o.drives[d]))
        EXPECT_EQ(f.find(".s") != std::string::npos, m.striped()) << f;
    if (m.striped()) {
      // 612 pages, 306 per drive.
      EXPECT_EQ(m.stripe_offsets, (Offsets{0, 306 * kPage, kBigRecord}));
      EXPECT_EQ(r.experts_written, uint64_t(moe_layers * m.experts * 2));
      for (int64_t e = 0; e < m.experts; ++e)
        for (int d = 0; d < 2; ++d) EXPECT_EQ(fs::file_size(m.stripe_path(d, 1, e)), 306 * kPage);
    } else {
      EXPECT_EQ(r.experts_written, uint64_t(moe_layers * m.experts));
    }
    EXPECT_TRUE(run_doctor(o.store, true).ok());
  }
  // "whole" asked for over 2 drives where auto would stripe: whole, as requested.
  TempDir root;
  SetupOptions o = options_for(big_checkpoint_dir(), root.path(), 2, "whole");
  const SetupReport r = run_setup(o);
  EXPECT_EQ(r.layout, "whole");
  EXPECT_EQ(r.layout_reason, "requested");
  EXPECT_FALSE(load_store_manifest(o.store).striped());
}

TEST(StripedSetup, RefusalsAreNamedAndWriteNothing) {
  TempDir root;
  const auto two = make_drives(root.path() + "/two", 2);
  auto expect_refused = [&](SetupOptions o, std::initializer_list<std::string> needles) {
    expect_error([&] { run_setup(o); }, needles);
    EXPECT_FALSE(fs::exists(o.store + "/store.json"));
    for (const std::string& d : o.drives) EXPECT_FALSE(fs::exists(d + "/deltafin-experts")) << d;
  };
  SetupOptions o = options_for(wide_checkpoint_dir(), root.path() + "/one", 1, "striped");
  expect_refused(o, {"--layout striped", "two drives or more", "names one"});

  o = options_for(wide_checkpoint_dir(), root.path() + "/hot", 2, "striped");
  o.replicate_hot = 3;
  expect_refused(o, {"--layout striped with --replicate-hot 3", "replicas are for --layout whole"});

  o = options_for(wide_checkpoint_dir(), root.path() + "/stream", 2, "striped");
  o.remote = RemoteSource{"http://127.0.0.1:1/k3", "", {{"model.safetensors", 1, "\"e\"", ""}}, 0};
  expect_refused(o, {"--layout striped with --stream", "use --layout whole or auto"});

  o = options_for(wide_checkpoint_dir(), root.path() + "/bad", 2, "raid0");
  expect_refused(o, {"--layout", "'raid0'", "auto, whole or striped"});

  // Records with fewer pages than drives: the tiny preset's 3264 bytes are one page.
  o = options_for(tiny_checkpoint_dir(), root.path() + "/tiny", 2, "striped");
  expect_refused(o, {"3264-byte", "fewer than the 2 drives"});
}

TEST(StripedSetup, RerunVerifiesAndSkipsEveryStripeAndRepairsDamagedOnes) {
  TempDir root;
  SetupOptions o = options_for(wide_checkpoint_dir(), root.path(), 3, "striped");
  run_setup(o);
  const std::string first = read_all(o.store + "/store.json");
  SetupReport r = run_setup(o);
  EXPECT_EQ(r.layout, "striped");
  EXPECT_EQ(r.experts_written, 0u);
  EXPECT_EQ(r.experts_skipped, uint64_t(kMoeExperts * 3));
  EXPECT_EQ(r.bytes_written, 0u);
  EXPECT_EQ(read_all(o.store + "/store.json"), first);

  // One stripe flipped, one removed: exactly those two are rewritten.
  const StoreManifest m = load_store_manifest(o.store);
  const std::string flipped = m.stripe_path(1, 3, 4), removed = m.stripe_path(2, 7, 15);
  std::string bytes = read_all(flipped);
  bytes[100] ^= 1;
  write_bytes(flipped, bytes);
  fs::remove(removed);
  r = run_setup(o);
  EXPECT_EQ(r.experts_written, 2u);
  EXPECT_EQ(r.experts_skipped, uint64_t(kMoeExperts * 3 - 2));
  EXPECT_EQ(r.bytes_written, m.stripe_bytes(1) + m.stripe_bytes(2));
  EXPECT_EQ(read_all(o.store + "/store.json"), first);
  expect_striped_store(o, 3, {0, 12288, 20480, 26112});
}

TEST(StripedSetup, InterruptedSetupThenRerunCompletesAndDoctorIsClean) {
  TempDir root;
  SetupOptions o = options_for(wide_checkpoint_dir(), root.path(), 3, "striped");
  o.stop_after_experts = 10;  // SIGINT after the 10th stripe: 3 experts and a third of the 4th
  EXPECT_FAILS_WITH(run_setup(o), "interrupted", "rerun");
  EXPECT_FALSE(file_exists(o.store + "/store.json"));
  size_t stripes = 0;
  for (const std::string& d : o.drives)
    for (const std::string& f : files_under(d)) {
      EXPECT_NE(f.find(".s"), std::string::npos) << f;
      EXPECT_EQ(f.find(".tmp-"), std::string::npos) << f;
      ++stripes;
    }
  EXPECT_EQ(stripes, 10u);
  // A kill -9 during the 11th stripe would have left its temporary, named
  // with a pid the kernel may since have given to a live process (issue 35).
  const LiveProcess other;
  const std::string half = o.drives[1] + "/deltafin-experts/L001/E003.s1of3.bin.tmp-" + std::to_string(other.pid());
  write_bytes(half, std::string(4096, 'x'));

  o.stop_after_experts = 0;
  const SetupReport r = run_setup(o);
  EXPECT_FALSE(file_exists(half));
  EXPECT_EQ(r.temps_removed, 1u);
  EXPECT_EQ(r.temp_bytes_removed, 4096u);
  EXPECT_EQ(r.experts_skipped, 10u);
  EXPECT_EQ(r.experts_written, uint64_t(kMoeExperts * 3 - 10));
  const DoctorReport d = run_doctor(o.store, true, false, 2);
  EXPECT_TRUE(d.ok()) << all(d);
  EXPECT_TRUE(d.strays.empty()) << d.strays[0].path;
  expect_striped_store(o, 3, {0, 12288, 20480, 26112});
}

TEST(StripedSetup, ChangingTheLayoutRewritesTheManifestAndTheExperts) {
  // A whole store set up again as striped: every expert is written as stripes,
  // the manifest describes them and the whole files are removed; back to
  // whole, the whole files are written again and the stripes removed. A rerun
  // with --layout auto keeps the layout it finds.
  TempDir root;
  SetupOptions o = options_for(wide_checkpoint_dir(), root.path(), 2, "whole");
  run_setup(o);
  const std::string whole_file = o.drives[0] + "/" + expert_relative_path(1, 0);
  const std::string stripe_file = o.drives[0] + "/" + stripe_relative_path(1, 0, 0, 2);
  ASSERT_TRUE(fs::exists(whole_file));
  o.layout = "striped";
  SetupReport r = run_setup(o);
  EXPECT_EQ(r.layout, "striped");
  EXPECT_EQ(r.experts_written, uint64_t(kMoeExperts * 2));
  EXPECT_EQ(r.experts_skipped, 0u);
  StoreManifest m = load_store_manifest(o.store);
  EXPECT_TRUE(m.striped());
  EXPECT_EQ(m.stripe_offsets, (Offsets{0, 16384, 26112}));
  EXPECT_FALSE(fs::exists(whole_file));
  EXPECT_TRUE(fs::exists(stripe_file));
  DoctorReport d = run_doctor(o.store, true);
  EXPECT_TRUE(d.ok()) << all(d);
  o.layout = "auto";
  r = run_setup(o);
  EXPECT_EQ(r.layout, "striped");
  EXPECT_EQ(r.layout_reason, "the existing store's layout (--layout changes it)");
  EXPECT_EQ(r.experts_written, 0u);
  EXPECT_EQ(r.experts_skipped, uint64_t(kMoeExperts * 2));
  o.layout = "whole";
  r = run_setup(o);
  EXPECT_EQ(r.layout, "whole");
  EXPECT_EQ(r.experts_written, uint64_t(kMoeExperts));
  EXPECT_EQ(r.experts_skipped, 0u);
  m = load_store_manifest(o.store);
  EXPECT_FALSE(m.striped());
  for (const ExpertEntry& e : m.entries) EXPECT_TRUE(e.stripe_crc32c.empty());
  EXPECT_TRUE(fs::exists(whole_file));
  EXPECT_FALSE(fs::exists(stripe_file));
  d = run_doctor(o.store, true);
  EXPECT_TRUE(d.ok()) << all(d);
}

// ------------------------------------------------------------------ doctor

namespace {

// A striped store of the wide checkpoint over 3 drives, built once and copied
// for each test (drive paths in the copy's manifest rewritten).
struct StripedStore {
  TempDir root;
  std::string store;
  StoreManifest m;
  StripedStore() {
    static TempDir pristine;
    static const bool built = [] {
      run_setup(options_for(wide_checkpoint_dir(), pristine.path(), 3, "striped"));
      return true;
    }();
    (void)built;
    fs::copy(pristine.path(), root.path(), fs::copy_options::recursive);
    store = root.path() + "/store";
    const std::string from = fs::canonical(pristine.path()).string(), to = fs::canonical(root.path()).string();
    m = load_store_manifest(store);
    for (StoreDrive& d : m.drives) d.path = to + d.path.substr(from.size());
    save_store_manifest(store, m);
  }
};

}  // namespace

TEST(StripedDoctor, CleanStorePasses) {
  StripedStore s;
  const DoctorReport quick = run_doctor(s.store, false);
  EXPECT_TRUE(quick.ok()) << all(quick);
  // store.json + 3 copied files + 11 spine files + 144 experts x 3 stripes
  EXPECT_EQ(quick.files_checked, 1u + 3 + 11 + kMoeExperts * 3);
  uint64_t copied = 0, spine = 0;
  for (const SourceFile& f : s.m.source_files) copied += f.sha256.empty() ? 0 : f.bytes;
  for (const SpineFileEntry& f : s.m.spine_files) spine += f.bytes;
  EXPECT_EQ(quick.bytes_hashed, copied);
  const DoctorReport full = run_doctor(s.store, true, false, 2);
  EXPECT_TRUE(full.ok()) << all(full);
  EXPECT_EQ(full.files_checked, quick.files_checked);
  EXPECT_EQ(full.bytes_hashed, copied + spine + kMoeExperts * kWideRecord) << "each record hashed once";
}

TEST(StripedDoctor, MissingStripeIsNamed) {
  StripedStore s;
  const std::string p = s.m.stripe_path(1, 2, 3);
  fs::remove(p);
  for (bool full : {false, true})
    expect_one_problem(run_doctor(s.store, full), {"layer 2, expert 3, drive 1", p, "stripe missing"});
}

TEST(StripedDoctor, TruncatedAndOversizedStripesAreNamed) {
  StripedStore s;
  const std::string p = s.m.stripe_path(2, 4, 5);
  fs::resize_file(p, s.m.stripe_bytes(2) - 1);
  for (bool full : {false, true})
    expect_one_problem(run_doctor(s.store, full),
                       {"layer 4, expert 5, drive 2", p, "size 5631 bytes", "records 5632", "truncated"});
  fs::resize_file(p, s.m.stripe_bytes(2) + 4096);
  expect_one_problem(run_doctor(s.store, false), {"layer 4, expert 5, drive 2", p, "size 9728 bytes"});
}

TEST(StripedDoctor, FlippedByteOnlyFoundByFullNamingTheStripe) {
  StripedStore s;
  const std::string p = s.m.stripe_path(1, 5, 11);
  std::string bytes = read_all(p);
  bytes[bytes.size() / 2] ^= 0x20;
  write_bytes(p, bytes);
  const DoctorReport quick = run_doctor(s.store, false);
  EXPECT_TRUE(quick.ok()) << "sizes only: " << all(quick);
  expect_one_problem(run_doctor(s.store, true), {"layer 5, expert 11", "SHA-256", "drive 1", p});
  // Only that stripe is blamed.
  const std::string msg = run_doctor(s.store, true).problems.at(0);
  EXPECT_EQ(msg.find("drive 0"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("drive 2"), std::string::npos) << msg;
}

TEST(StripedDoctor, SwappedStripesAreFound) {
  // Two stripes of the same size swapped between experts: every size is right.
  StripedStore s;
  const std::string a = s.m.stripe_path(0, 1, 0), b = s.m.stripe_path(0, 1, 1);
  const std::string bytes_a = read_all(a), bytes_b = read_all(b);
  ASSERT_NE(bytes_a, bytes_b);
  write_bytes(a, bytes_b);
  write_bytes(b, bytes_a);
  EXPECT_TRUE(run_doctor(s.store, false).ok());
  const DoctorReport r = run_doctor(s.store, true);
  ASSERT_EQ(r.problems.size(), 2u) << all(r);
  EXPECT_NE(all(r).find("layer 1, expert 0"), std::string::npos) << all(r);
  EXPECT_NE(all(r).find("layer 1, expert 1"), std::string::npos) << all(r);
  EXPECT_NE(all(r).find(a), std::string::npos) << all(r);
  EXPECT_NE(all(r).find(b), std::string::npos) << all(r);
}

TEST(StripedDoctor, WrongRecordedStripeCrcIsFoundByFull) {
  StripedStore s;
  json j = json::parse(read_text_file(s.store + "/store.json"));
  // placement[(layer - 1) * 16 + expert]: layer 6, expert 2.
  json& entry = j["placement"][5 * 16 + 2];
  ASSERT_EQ(entry["layer"], 6);
  ASSERT_EQ(entry["expert"], 2);
  entry["stripe_crc32c"][2] = entry["stripe_crc32c"][2].get<uint64_t>() ^ 1;
  write_file_atomic(s.store + "/store.json", j.dump());
  EXPECT_TRUE(run_doctor(s.store, false).ok());
  expect_one_problem(run_doctor(s.store, true), {"layer 6, expert 2", "recorded CRC-32C of stripe 2 is wrong"});
}

TEST(StripedDoctor, MissingDriveIsOneProblem) {
  StripedStore s;
  fs::remove_all(s.m.drives[1].path);
  // Every expert has a stripe on every drive.
  for (bool full : {false, true})
    expect_one_problem(run_doctor(s.store, full),
                       {"drive 1", s.m.drives[1].path, "missing", cat(kMoeExperts, " expert files")});
}

// ------------------------------------------------------------------ CLI

TEST(StripedCli, SetupLayoutFlagThenDoctor) {
  TempDir root;
  const auto drives = make_drives(root.path(), 3);
  auto setup = [&](const std::string& drive_list, const std::string& mbps, const std::string& extra) {
    return cat(deltafin_binary(), " setup --from ", wide_checkpoint_dir(), " --store ", root.file("store"), " --drives ",
               drive_list, " --drive-mbps ", mbps, " --spine bf16 --quiet ", extra);
  };
  const std::string three = drives[0] + "," + drives[1] + "," + drives[2];
  std::string out;
  ASSERT_EQ(run_command(setup(three, "1500,1500,1500", "--layout striped"), &out), 0) << out;
  EXPECT_NE(out.find("layout: striped — requested"), std::string::npos) << out;
  EXPECT_NE(out.find("striped layout, 432 expert files written, 0 already there"), std::string::npos) << out;
  EXPECT_EQ(load_store_manifest(root.file("store")).stripe_offsets, (Offsets{0, 12288, 20480, 26112}));
  ASSERT_EQ(run_command(cat(deltafin_binary(), " doctor --full --quiet --store ", root.file("store")), &out), 0) << out;

  // The default is auto: a rerun keeps the store's layout.
  ASSERT_EQ(run_command(setup(three, "1500,1500,1500", ""), &out), 0) << out;
  EXPECT_NE(out.find("layout: striped — the existing store's layout (--layout changes it)"), std::string::npos) << out;
  EXPECT_NE(out.find("striped layout, 0 expert files written, 432 already there"), std::string::npos) << out;
  EXPECT_TRUE(load_store_manifest(root.file("store")).striped());
  // On a new store, 26112-byte records are too small for auto to stripe.
  fs::remove(root.file("store/store.json"));
  ASSERT_EQ(run_command(setup(three, "1500,1500,1500", ""), &out), 0) << out;
  EXPECT_NE(out.find("layout: whole — expert records of 26112 bytes are under 1 MiB per drive"), std::string::npos) << out;
  EXPECT_NE(out.find("whole layout, 144 expert files written"), std::string::npos) << out;
  EXPECT_FALSE(load_store_manifest(root.file("store")).striped());

  EXPECT_EQ(run_command(setup(drives[0], "1500", "--layout striped"), &out), 1) << out;
  EXPECT_NE(out.find("--layout striped: stripes need two drives or more"), std::string::npos) << out;
  EXPECT_NE(run_command(setup(three, "1500,1500,1500", "--layout raid0"), &out), 0) << out;
  EXPECT_NE(out.find("--layout"), std::string::npos) << out;
}
}  // namespace striped_store_test
