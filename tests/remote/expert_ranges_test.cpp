// remote/expert_ranges.h: where every routed expert's tensors lie in a
// checkpoint's shards (remote/experts.bin, version 2; version 1 files of
// K3 stores from before model families still load). Checked against a generated tiny
// checkpoint opened locally, with the RemoteFile names the shard file names,
// so every range can be read back with pread and compared with the record the
// checkpoint reader assembles.
#include "remote/expert_ranges.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/family_checkpoint.h"
#include "model/kimi_k3/tensors.h"
#include "model/kimi_k3/generator.h"
#include "model/qwen3_moe/family_checkpoint.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "remote/prefetch_experts.h"
#include "support/test_support.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;

namespace {

// A tiny checkpoint cut into many small shards (about 40 KB each), so experts
// spread over several shards and some straddle a shard boundary.
struct Fixture {
  TempDir dir;
  std::string ckpt;
  K3Checkpoint k;
  std::unique_ptr<K3FamilyCheckpoint> family;  // over k
  std::vector<RemoteFile> shards;  // sorted by name, sizes from the files
  ExpertRanges ranges;
};

const Fixture& fixture() {
  static Fixture* f = [] {
    auto* x = new Fixture;
    GenerateOptions o;
    o.out_dir = x->dir.file("ckpt");
    o.seed = 11;
    o.dims = preset_dims("tiny");
    o.shard_bytes = 40 << 10;
    o.progress = false;
    generate_k3_checkpoint(o);
    x->ckpt = o.out_dir;
    x->k = load_k3_checkpoint(x->ckpt);
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(x->ckpt))
      if (e.path().extension() == ".safetensors") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) x->shards.push_back({n, fs::file_size(x->ckpt + "/" + n), "\"etag-" + n + "\"", ""});
    x->family = std::make_unique<K3FamilyCheckpoint>(x->k);
    x->ranges = ExpertRanges::from_checkpoint(*x->family, x->shards);
    return x;
  }();
  return *f;
}

// The manifest fields ExpertRanges::load checks against.
StoreManifest manifest_for(const Fixture& f) {
  StoreManifest m;
  m.layers = f.k.config.num_hidden_layers;
  m.experts = f.k.config.num_experts;
  m.expert_bytes = k3_expert_record_bytes(f.k.config);
  RemoteSource r;
  r.url = "http://127.0.0.1:1/ckpt";
  r.shards = f.shards;
  m.remote = r;
  return m;
}

std::vector<uint8_t> pread_range(const std::string& path, uint64_t offset, uint64_t n) {
  std::vector<uint8_t> out(n);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return out;
  EXPECT_EQ(::pread(fd, out.data(), n, static_cast<off_t>(offset)), static_cast<ssize_t>(n)) << path;
  ::close(fd);
  return out;
}

bool same_ranges(std::span<const TensorRange> a, std::span<const TensorRange> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].shard != b[i].shard || a[i].offset != b[i].offset || a[i].bytes != b[i].bytes) return false;
  return true;
}

}  // namespace

TEST(ExpertRanges, TinyCheckpointHasSeveralShards) {
  const Fixture& f = fixture();
  EXPECT_GE(f.shards.size(), 3u) << "the fixture should spread experts over several shards";
  EXPECT_EQ(f.k.tensors.shards().size(), f.shards.size());
}

// Each expert's six ranges against the shard headers, found independently:
// the shard whose header lists the tensor, its data_offsets, the header length.
TEST(ExpertRanges, EachExpertsSixRangesMatchTheShardHeaders) {
  const Fixture& f = fixture();
  const K3Config& c = f.k.config;
  std::map<std::string, uint32_t> index;
  for (size_t i = 0; i < f.shards.size(); ++i) index[f.shards[i].name] = static_cast<uint32_t>(i);
  size_t checked = 0;
  for (int64_t l = 1; l < c.num_hidden_layers; ++l)
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::vector<TensorSpec> specs = k3_expert_tensors(c, l, e);
      const std::span<const TensorRange> got = f.ranges.tensors(l, e);
      ASSERT_EQ(got.size(), 6u);
      ASSERT_EQ(specs.size(), 6u);
      for (size_t t = 0; t < specs.size(); ++t) {
        SCOPED_TRACE(cat("layer ", l, " expert ", e, " tensor ", specs[t].name));
        const SafetensorsFile* holder = nullptr;
        const TensorInfo* info = nullptr;
        for (const auto& shard : f.k.tensors.shards())
          if (const TensorInfo* ti = shard->find(specs[t].name)) {
            ASSERT_EQ(holder, nullptr) << "tensor in two shards";
            holder = shard.get();
            info = ti;
          }
        ASSERT_NE(info, nullptr);
        const std::string shard_name = fs::path(holder->path()).filename().string();
        EXPECT_EQ(got[t].shard, index.at(shard_name));
        EXPECT_EQ(f.shards[got[t].shard].name, shard_name);
        EXPECT_EQ(got[t].offset, 8 + holder->header_length() + info->begin);
        EXPECT_EQ(got[t].offset, info->file_offset);
        EXPECT_EQ(got[t].bytes, info->end - info->begin);
        EXPECT_EQ(got[t].bytes, specs[t].bytes());
        EXPECT_LE(got[t].offset + got[t].bytes, f.shards[got[t].shard].bytes);
        ++checked;
      }
    }
  EXPECT_EQ(checked, static_cast<size_t>((c.num_hidden_layers - 1) * c.num_experts) * 6);
}

// requests(): adjacent ranges of one shard merged, nothing else; the
// concatenated bytes of the requests, read with pread, are the record.
TEST(ExpertRanges, RequestsMergeAdjacentRangesAndReadTheRecord) {
  const Fixture& f = fixture();
  const K3Config& c = f.k.config;
  const uint64_t record_bytes = k3_expert_record_bytes(c);
  size_t single = 0, multi = 0;
  for (int64_t l = 1; l < c.num_hidden_layers; ++l)
    for (int64_t e = 0; e < c.num_experts; ++e) {
      SCOPED_TRACE(cat("layer ", l, " expert ", e));
      const std::span<const TensorRange> t = f.ranges.tensors(l, e);
      const std::vector<TensorRange> req = f.ranges.requests(l, e);
      ASSERT_FALSE(req.empty());
      // Expected count: one request plus one per break (other shard, or a gap).
      size_t breaks = 0;
      for (size_t i = 1; i < t.size(); ++i)
        breaks += t[i].shard != t[i - 1].shard || t[i - 1].offset + t[i - 1].bytes != t[i].offset;
      EXPECT_EQ(req.size(), 1 + breaks);
      // Maximal: no two consecutive requests could have been merged.
      for (size_t i = 1; i < req.size(); ++i)
        EXPECT_FALSE(req[i].shard == req[i - 1].shard && req[i - 1].offset + req[i - 1].bytes == req[i].offset);
      uint64_t sum = 0;
      std::vector<uint8_t> bytes;
      for (const TensorRange& r : req) {
        sum += r.bytes;
        const std::vector<uint8_t> part = pread_range(f.ckpt + "/" + f.shards[r.shard].name, r.offset, r.bytes);
        bytes.insert(bytes.end(), part.begin(), part.end());
      }
      EXPECT_EQ(sum, record_bytes);
      const std::vector<uint8_t> record = f.k.read_expert_record(l, e);
      ASSERT_EQ(record.size(), record_bytes);
      EXPECT_TRUE(bytes == record) << "pread of the requests differs from read_expert_record";
      (req.size() == 1 ? single : multi) += 1;
    }
  std::printf("experts in one request: %zu, in several: %zu\n", single, multi);
  EXPECT_GT(single, 0u);
}

TEST(ExpertRanges, LayerZeroAndOutOfRangeAreErrors) {
  const Fixture& f = fixture();
  const int64_t L = f.k.config.num_hidden_layers, E = f.k.config.num_experts;
  EXPECT_FAILS_WITH(f.ranges.tensors(0, 0), "layer 0");
  EXPECT_FAILS_WITH(f.ranges.requests(0, 3), "layer 0", "expert 3");
  EXPECT_FAILS_WITH(f.ranges.tensors(L, 0), cat("layer ", L));
  EXPECT_FAILS_WITH(f.ranges.tensors(1, E), cat("expert ", E));
  EXPECT_FAILS_WITH(f.ranges.tensors(1, -1), "expert -1");
}

TEST(ExpertRanges, ShardMissingFromTheListIsAnError) {
  const Fixture& f = fixture();
  // Drop the shard holding an expert tensor (the first shards hold only the spine).
  const uint32_t drop = f.ranges.tensors(5, 7)[0].shard;
  std::vector<RemoteFile> fewer = f.shards;
  fewer.erase(fewer.begin() + drop);
  EXPECT_FAILS_WITH(ExpertRanges::from_checkpoint(*f.family, fewer), f.shards[drop].name, "not among the mirror's files");
}

TEST(ExpertRanges, SaveLoadRoundTrip) {
  const Fixture& f = fixture();
  TempDir store;
  f.ranges.save(store.path());
  const std::string path = ExpertRanges::path(store.path());
  EXPECT_EQ(path, store.path() + "/remote/experts.bin");
  ASSERT_TRUE(file_exists(path));
  const StoreManifest m = manifest_for(f);
  const size_t count = static_cast<size_t>((m.layers - 1) * m.experts) * 6;
  // Version 2: magic, 5 u64 header fields, the MoE layers (1..L-1), 20 bytes per range, a CRC.
  EXPECT_EQ(fs::file_size(path), 8 + 5 * 8 + static_cast<size_t>(m.layers - 1) * 8 + count * 20 + 4);
  const std::string bytes = test::read_bytes(path);
  EXPECT_EQ(bytes.substr(0, 8), "DFXR0002");
  // No temporaries left by the atomic write.
  for (const auto& e : fs::directory_iterator(store.path() + "/remote"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();

  const ExpertRanges back = ExpertRanges::load(store.path(), m);
  for (int64_t l = 1; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e) {
      EXPECT_TRUE(same_ranges(back.tensors(l, e), f.ranges.tensors(l, e))) << l << "/" << e;
      const std::vector<TensorRange> a = back.requests(l, e), b = f.ranges.requests(l, e);
      EXPECT_TRUE(same_ranges(a, b)) << l << "/" << e;
    }
  // Saving again gives the same bytes.
  f.ranges.save(store.path());
  EXPECT_EQ(test::read_bytes(path), bytes);
}

TEST(ExpertRanges, LoadRefusesDamagedOrForeignFiles) {
  const Fixture& f = fixture();
  const StoreManifest m = manifest_for(f);
  TempDir store;
  f.ranges.save(store.path());
  const std::string path = ExpertRanges::path(store.path());
  const std::string good = test::read_bytes(path);

  // A flipped byte anywhere in the ranges (or the stored CRC).
  for (const size_t at : {good.size() / 2, size_t{40}, good.size() - 1}) {
    SCOPED_TRACE(at);
    std::string bad = good;
    bad[at] ^= 0x08;
    write_bytes(path, bad);
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), m), path, "checksum mismatch");
  }
  // Bad magic.
  {
    std::string bad = good;
    bad[3] = 'Y';
    write_bytes(path, bad);
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), m), path, "bad magic");
  }
  // Wrong sizes.
  for (const std::string& bad : {good.substr(0, good.size() - 1), good + std::string(1, '\0'), good.substr(0, 100),
                                 std::string()}) {
    SCOPED_TRACE(bad.size());
    write_bytes(path, bad);
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), m), path, cat(bad.size(), " bytes, expected ", good.size()));
  }
  write_bytes(path, good);
  ASSERT_NO_THROW(ExpertRanges::load(store.path(), m));

  // A manifest with other layer or expert counts: a different size...
  {
    StoreManifest other = m;
    other.layers = m.layers - 1;
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), other), path, "expected");
    other = m;
    other.experts = m.experts * 2;
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), other), path, "expected");
  }
  // ...or the same number of ranges for another shape (9 x 16 = 3 x 48):
  // the layer list makes a version 2 file's size differ, and in a version 1
  // file (below) the header says.
  {
    StoreManifest other = m;
    ASSERT_EQ((m.layers - 1) * m.experts, 144);
    other.layers = 4;
    other.experts = 48;
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), other), path, "expected");
  }
  // Another shard count.
  {
    StoreManifest other = m;
    other.remote->shards.push_back({"extra.safetensors", 100, "", ""});
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), other), path, cat("over ", f.shards.size(), " shards"));
  }
  // A shard smaller on the manifest than the ranges need.
  {
    StoreManifest other = m;
    for (RemoteFile& s : other.remote->shards) s.bytes = 10;
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), other), path, "is outside");
  }
  // Another record size.
  {
    StoreManifest other = m;
    other.expert_bytes = m.expert_bytes + 1;
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), other), path, "ranges hold");
  }
  // No remote section, no file.
  {
    StoreManifest other = m;
    other.remote.reset();
    EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), other), path, "no remote section");
  }
  fs::remove(path);
  EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), m), "experts.bin");
}

// The version 1 layout (K3 stores streamed before model families): the same
// ranges without the parts and layer fields, still read; for a manifest of
// another record layout it is refused.
TEST(ExpertRanges, AVersionOneFileStillLoads) {
  const Fixture& f = fixture();
  const StoreManifest m = manifest_for(f);
  TempDir store;
  f.ranges.save(store.path());
  const std::string path = ExpertRanges::path(store.path());
  const std::string v2 = test::read_bytes(path);
  const size_t v2_header = 8 + 5 * 8 + static_cast<size_t>(m.layers - 1) * 8;
  std::string v1 = "DFXR0001" + v2.substr(8, 24) + v2.substr(v2_header, v2.size() - v2_header - 4);
  std::string crc(4, '\0');
  const uint32_t c = crc32c(v1.data(), v1.size());
  for (int i = 0; i < 4; ++i) crc[static_cast<size_t>(i)] = static_cast<char>(c >> (8 * i));
  write_bytes(path, v1 + crc);
  const ExpertRanges back = ExpertRanges::load(store.path(), m);
  EXPECT_EQ(back.parts(), 6u);
  for (int64_t l = 1; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e) EXPECT_TRUE(same_ranges(back.tensors(l, e), f.ranges.tensors(l, e)));
  StoreManifest other = m;
  other.layers = 4;
  other.experts = 48;  // 9 x 16 = 3 x 48 records: same size, another shape
  EXPECT_FAILS_WITH(ExpertRanges::load(store.path(), other), path, cat("written for ", m.layers, " layers x ", m.experts),
                    "store.json has 4 x 48");
}

// The fetcher's MXFP4 structure check comes from the record layout: K3's
// record is three matrices (w1 and w3 [mid, lat], w2 [lat, mid]); Qwen3-MoE's
// BF16 record has none (its bytes are checked by hash only).
TEST(ExpertRanges, Mxfp4MatricesFollowTheRecordLayout) {
  const K3Config& c = fixture().k.config;
  const std::vector<ExpertMatrixShape> k3 = mxfp4_matrices(k3_record_layout(c));
  ASSERT_EQ(k3.size(), 3u);
  const uint64_t mid = static_cast<uint64_t>(c.moe_intermediate_size), lat = static_cast<uint64_t>(c.routed_expert_hidden_size);
  EXPECT_EQ(k3[0].rows, mid);
  EXPECT_EQ(k3[0].cols, lat);
  EXPECT_EQ(k3[1].rows, lat);
  EXPECT_EQ(k3[1].cols, mid);
  EXPECT_EQ(k3[2].rows, mid);
  EXPECT_EQ(k3[2].cols, lat);
  Qwen3MoeConfig q;
  q.base.hidden_size = 64;
  q.base.num_hidden_layers = 2;
  q.moe_intermediate_size = 32;
  q.num_experts = 4;
  q.num_experts_per_tok = 2;
  q.moe_layer = {true, true};
  EXPECT_TRUE(mxfp4_matrices(qwen3_moe_record_layout(q)).empty());
}

// A Qwen3-MoE checkpoint in shards: each record is the gate, up and down
// projections of one expert, in that order, and only the sparse layers have
// ranges (layer 0 is dense here).
TEST(ExpertRanges, Qwen3MoeRecordsAreGateUpDownOfTheSparseLayers) {
  TempDir dir;
  Qwen3MoeGenerateOptions o;
  o.out_dir = dir.file("q");
  o.seed = 4;
  o.dims = qwen3_moe_preset("tiny");
  o.dims.mlp_only_layers = {0};
  o.shards = 3;
  generate_qwen3_moe_checkpoint(o);
  const Qwen3MoeFamilyCheckpoint k(o.out_dir);
  std::vector<RemoteFile> shards;
  for (const auto& e : fs::directory_iterator(o.out_dir))
    if (e.path().extension() == ".safetensors") shards.push_back({e.path().filename().string(), fs::file_size(e.path()), "", ""});
  std::sort(shards.begin(), shards.end(), [](const RemoteFile& a, const RemoteFile& b) { return a.name < b.name; });
  const ExpertRanges r = ExpertRanges::from_checkpoint(k, shards);
  EXPECT_EQ(r.parts(), 3u);
  EXPECT_FAILS_WITH(r.tensors(0, 0), "layer 0");
  for (int64_t l : k.moe_layers())
    for (int64_t e = 0; e < k.experts(); ++e) {
      std::vector<uint8_t> bytes;
      for (const TensorRange& t : r.requests(l, e)) {
        const std::vector<uint8_t> part = pread_range(o.out_dir + "/" + shards[t.shard].name, t.offset, t.bytes);
        bytes.insert(bytes.end(), part.begin(), part.end());
      }
      EXPECT_TRUE(bytes == k.read_expert_record(l, e)) << "layer " << l << " expert " << e;
    }
}
