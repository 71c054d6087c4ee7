// The small-checkpoint generator: output loads through the real loader, is
// deterministic per seed, keeps K3's layout rules, and has sane weight scales.
#include "model/kimi_k3/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/tensors.h"
#include "format/mxfp4.h"
#include "support/test_support.h"
#include "util/file.h"
#include "util/numeric.h"
#include "util/error.h"
#include "util/sha256.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

GenerateOptions tiny_options(const std::string& dir, uint64_t seed) {
  GenerateOptions o;
  o.out_dir = dir;
  o.seed = seed;
  o.dims = preset_dims("tiny");
  o.progress = false;
  return o;
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += fs::file_size(e.path());
  return n;
}

std::string shard_hashes(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& p : names) out += sha256_file_hex(p) + "\n";
  return out;
}

// Standard deviation of a BF16 matrix's values.
double bf16_std(const K3Checkpoint& k, const std::string& name) {
  TensorRef t = k.tensor(name);
  std::vector<uint8_t> raw(t.info->bytes());
  t.shard->read(*t.info, raw.data());
  double s = 0, s2 = 0;
  size_t n = raw.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    double v = bf16_to_f32(load_u16le(&raw[2 * i]));
    s += v, s2 += v * v;
  }
  return std::sqrt(s2 / n - (s / n) * (s / n));
}

}  // namespace

TEST(Generator, TinyLoadsAndFollowsTheLayout) {
  test::TempDir tmp;
  GenerateResult r = generate_k3_checkpoint(tiny_options(tmp.path(), 7));
  EXPECT_GE(r.shards, 2);
  for (const char* f : {"config.json", "model.safetensors.index.json", "tiktoken.model", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(tmp.file(f))) << f;
  EXPECT_LT(dir_bytes(tmp.path()), 5u << 20) << "tiny must stay under 5 MB";

  K3Checkpoint k = load_k3_checkpoint(tmp.path());
  EXPECT_EQ(k.config.hidden_size, 64);
  EXPECT_EQ(k.config.num_hidden_layers, 10);
  EXPECT_EQ(k.config.full_attn_layers, (std::vector<int64_t>{4, 8, 10}));
  EXPECT_EQ(k.config.vocab_size, 768);
  EXPECT_EQ(k.config.bos_token_id, 512);
  EXPECT_EQ(k.config.eos_token_id, 514);
  EXPECT_EQ(k.config.pad_token_id, 767);
  EXPECT_EQ(k.ignored_tensors, 2u);  // one vision_tower.* and one mm_projector.*
  EXPECT_FALSE(k.pinned_revision);
  // 5 globals + layer 0 (23) + 6 other KDA layers (28) + 3 MLA layers (22) + 9 x 16 experts x 6 + 2 vision.
  EXPECT_EQ(k.tensors.tensor_count(), 5u + 23 + 6 * 28 + 3 * 22 + 9 * 16 * 6 + 2);
  // Expert record: w1/w3 packed 64x16, scale 64x1; w2 packed 32x32, scale 32x2.
  EXPECT_EQ(k3_expert_record_bytes(k.config), 2u * (64 * 16 + 64) + (32 * 32 + 32 * 2));
  // Every MXFP4 scale passes the import check and sits in a realistic range.
  for (int64_t l = 1; l < 10; ++l)
    for (int64_t e = 0; e < 16; ++e) {
      TensorRef s = k.tensor(k3_expert_tensor(l, e, "w2", true));
      std::vector<uint8_t> scales(s.info->bytes());
      s.shard->read(*s.info, scales.data());
      for (uint8_t b : scales) ASSERT_TRUE(b > 100 && b < 140) << int(b);
    }
}

TEST(Generator, SameSeedSameBytesOtherSeedOtherBytes) {
  test::TempDir a, b, c;
  generate_k3_checkpoint(tiny_options(a.path(), 3));
  generate_k3_checkpoint(tiny_options(b.path(), 3));
  generate_k3_checkpoint(tiny_options(c.path(), 4));
  EXPECT_FALSE(shard_hashes(a.path()).empty());
  EXPECT_EQ(shard_hashes(a.path()), shard_hashes(b.path()));
  EXPECT_NE(shard_hashes(a.path()), shard_hashes(c.path()));
  EXPECT_EQ(read_text_file(a.file("tiktoken.model")), read_text_file(c.file("tiktoken.model")));
}

TEST(Generator, WeightScalesKeepActivationsOrderOne) {
  test::TempDir tmp;
  generate_k3_checkpoint(tiny_options(tmp.path(), 11));
  K3Checkpoint k = load_k3_checkpoint(tmp.path());
  // Projections: std ~ 1/sqrt(fan-in) (64 -> 0.125), within 15 %.
  double s = bf16_std(k, k3_layer_tensor(1, "self_attn.q_proj.weight"));
  EXPECT_NEAR(s, 0.125, 0.125 * 0.15);
  EXPECT_NEAR(bf16_std(k, "language_model.model.embed_tokens.weight"), 1.0, 0.1);
  // Decoded MXFP4 w1 (fan-in 32): std within a factor 2 of 1/sqrt(32).
  std::vector<uint8_t> rec = k.read_expert_record(1, 0);
  const size_t rows = 64, cols = 32;
  double s2 = 0;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      uint8_t byte = rec[r * cols / 2 + c / 2];
      uint8_t nib = c % 2 ? byte >> 4 : byte & 15;
      double v = mxfp4_value(nib, rec[rows * cols / 2 + r * (cols / 32) + c / 32]);
      s2 += v * v;
    }
  double rms = std::sqrt(s2 / (rows * cols));
  EXPECT_GT(rms, 0.5 / std::sqrt(32.0));
  EXPECT_LT(rms, 2.0 / std::sqrt(32.0));
  // A_log must not be constant: it tells per-channel from per-head indexing apart.
  TensorRef a = k.tensor(k3_layer_tensor(0, "self_attn.A_log"));
  std::vector<float> alog(a.info->elements());
  a.shard->read(*a.info, alog.data());
  EXPECT_NE(alog[0], alog[1]);
}

TEST(Generator, RefusesToOverwriteWithoutForce) {
  test::TempDir tmp;
  generate_k3_checkpoint(tiny_options(tmp.path(), 1));
  std::string before = shard_hashes(tmp.path());
  try {
    generate_k3_checkpoint(tiny_options(tmp.path(), 2));
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_EQ(shard_hashes(tmp.path()), before) << "a refused run must not touch the checkpoint";
  GenerateOptions o = tiny_options(tmp.path(), 2);
  o.force = true;
  generate_k3_checkpoint(o);
  EXPECT_NE(shard_hashes(tmp.path()), before);
  EXPECT_NO_THROW(load_k3_checkpoint(tmp.path()));
}

TEST(Generator, OverridesAndBenchExpertSize) {
  K3Dims d = apply_overrides(preset_dims("bench"), DimOverrides{.hidden = {}, .layers = 3, .experts = 4, .top_k = 2, .vocab = {}, .latent = {}, .moe_intermediate = {}, .intermediate = {}});
  nlohmann::json j = k3_config_json(d);
  K3Config c = parse_k3_config(j, "bench config");
  EXPECT_EQ(k3_expert_record_bytes(c), 17547264u);  // the real K3 record size
  EXPECT_EQ(c.full_attn_layers, (std::vector<int64_t>{3}));
  // The k3 preset reproduces the real schedule: MLA at 0-based 3, 7, ..., 91 and 92.
  K3Config k3 = parse_k3_config(k3_config_json(preset_dims("k3")), "k3 config");
  int mla = 0;
  for (size_t i = 0; i < k3.layer_kinds.size(); ++i)
    if (k3.layer_kinds[i] == LayerKind::MLA) {
      ++mla;
      EXPECT_TRUE(i % 4 == 3 || i == 92) << i;
    }
  EXPECT_EQ(mla, 24);
  EXPECT_THROW(apply_overrides(preset_dims("tiny"), DimOverrides{.hidden = {}, .layers = {}, .experts = 2, .top_k = {}, .vocab = {}, .latent = {}, .moe_intermediate = {}, .intermediate = {}}), Error);  // top-4 > 2 experts
}
