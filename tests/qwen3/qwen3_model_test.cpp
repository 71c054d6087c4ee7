// The Qwen3 draft model's forward pass on generated tiny checkpoints: against
// the float64 reference, T positions at once == T single positions (bit for
// bit), rollback by truncate == a fresh session, tied and untied embeddings,
// single-file and sharded checkpoints, and the loader's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/safetensors_writer.h"
#include "model/qwen3/qwen3_generator.h"
#include "model/qwen3/qwen3_model.h"
#include "qwen3/reference_qwen3.h"
#include "support/test_support.h"
#include "util/file.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;

Qwen3GenerateOptions tiny(const std::string& dir, bool tied, int shards = 1, uint64_t seed = 7) {
  Qwen3GenerateOptions o;
  o.out_dir = dir;
  o.seed = seed;
  o.hidden = 64, o.intermediate = 96, o.layers = 2, o.heads = 4, o.kv_heads = 2, o.head_dim = 32;
  o.vocab = 300;
  o.max_position_embeddings = 64;
  o.tie_word_embeddings = tied;
  o.shards = shards;
  return o;
}

struct Loaded {
  Qwen3Config config;
  Qwen3Weights weights;
};

Loaded load(const std::string& dir) {
  Loaded l;
  l.config = read_qwen3_config(dir + "/config.json");
  l.weights = load_qwen3_weights(l.config, dir);
  return l;
}

// ||a - b|| / ||b|| over one row.
double relative_l2(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

// fp32 activations with exact BF16 weights against float64 on the same
// weights: the difference is fp32 rounding only, of order 1e-7 per operation
// and a few 1e-7 relative after two layers; 1e-5 leaves a wide margin while
// still catching any real deviation (a wrong RoPE pair or norm is O(1)).
constexpr double kTolerance = 1e-5;

void expect_matches_reference(const std::string& dir, ThreadPool* pool) {
  Loaded m = load(dir);
  test::ReferenceQwen3 ref(dir);
  const std::vector<uint32_t> tokens = test::random_tokens(11, 13, static_cast<uint32_t>(m.config.vocab_size));
  const std::vector<double> want = ref.logits(tokens);
  Qwen3Model model(m.config, m.weights, pool);
  Qwen3Session session(m.config);
  const std::vector<float> got = model.forward(session, tokens, true);
  const size_t V = m.config.vocab_size;
  ASSERT_EQ(got.size(), tokens.size() * V);
  double worst = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const double e = relative_l2(got.data() + t * V, want.data() + t * V, V);
    EXPECT_LE(e, kTolerance) << "position " << t;
    worst = std::max(worst, e);
  }
  // The logits are not degenerate: rows differ and are of order 1.
  double rms = 0;
  for (size_t i = 0; i < V; ++i) rms += want[i] * want[i];
  rms = std::sqrt(rms / V);
  EXPECT_GT(rms, 0.1);
  EXPECT_LT(rms, 100.0);
  for (float v : got) ASSERT_TRUE(std::isfinite(v));
  ::testing::Test::RecordProperty("worst_relative_l2", std::to_string(worst));
  std::printf("worst relative L2 vs float64: %.3g\n", worst);
}

TEST(Qwen3Model, UntiedMatchesFloat64Reference) {
  test::TempDir dir;
  generate_qwen3_checkpoint(tiny(dir.path(), false));
  expect_matches_reference(dir.path(), nullptr);
}

TEST(Qwen3Model, TiedMatchesFloat64Reference) {
  test::TempDir dir;
  generate_qwen3_checkpoint(tiny(dir.path(), true));
  Loaded m = load(dir.path());
  EXPECT_TRUE(m.config.tie_word_embeddings);
  EXPECT_EQ(m.weights.lm_head.rows, 0u);
  EXPECT_EQ(&m.weights.output(), &m.weights.embed);
  expect_matches_reference(dir.path(), nullptr);
}

TEST(Qwen3Model, TPositionsEqualSinglePositionsBitForBit) {
  test::TempDir dir;
  generate_qwen3_checkpoint(tiny(dir.path(), false));
  Loaded m = load(dir.path());
  ThreadPool pool(2);
  const std::vector<uint32_t> tokens = test::random_tokens(3, 17, static_cast<uint32_t>(m.config.vocab_size));
  const size_t V = m.config.vocab_size;

  Qwen3Model batched(m.config, m.weights, &pool);
  Qwen3Session s1(m.config);
  const std::vector<float> all = batched.forward(s1, tokens, true);

  Qwen3Model single(m.config, m.weights, nullptr);  // and no pool: the thread count must not matter either
  Qwen3Session s2(m.config);
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::vector<float> one = single.forward(s2, std::span<const uint32_t>(&tokens[t], 1), false);
    ASSERT_EQ(one.size(), V);
    EXPECT_EQ(std::memcmp(one.data(), all.data() + t * V, V * sizeof(float)), 0) << "position " << t;
  }
  // Uneven chunks give the same too, and the last-row-only result is the last row.
  Qwen3Session s3(m.config);
  std::vector<float> a = batched.forward(s3, std::span<const uint32_t>(tokens.data(), 5), true);
  std::vector<float> b = batched.forward(s3, std::span<const uint32_t>(tokens.data() + 5, 12), false);
  EXPECT_EQ(std::memcmp(a.data(), all.data(), 5 * V * sizeof(float)), 0);
  ASSERT_EQ(b.size(), V);
  EXPECT_EQ(std::memcmp(b.data(), all.data() + 16 * V, V * sizeof(float)), 0);
  EXPECT_EQ(s3.length(), 17);
}

TEST(Qwen3Model, TruncateThenRerunEqualsFresh) {
  test::TempDir dir;
  generate_qwen3_checkpoint(tiny(dir.path(), true));
  Loaded m = load(dir.path());
  Qwen3Model model(m.config, m.weights, nullptr);
  const uint32_t vocab = static_cast<uint32_t>(m.config.vocab_size);
  const std::vector<uint32_t> prompt = test::random_tokens(1, 9, vocab);
  const std::vector<uint32_t> draft = test::random_tokens(2, 5, vocab);
  const std::vector<uint32_t> next = test::random_tokens(4, 4, vocab);

  // Prompt, a 5-token draft of which 2 are accepted, then new tokens.
  Qwen3Session s(m.config);
  model.forward(s, prompt, false);
  model.forward(s, draft, true);
  EXPECT_EQ(s.length(), 14);
  s.truncate(11);
  EXPECT_EQ(s.length(), 11);
  const std::vector<float> after = model.forward(s, next, true);

  std::vector<uint32_t> seq = prompt;
  seq.insert(seq.end(), draft.begin(), draft.begin() + 2);
  seq.insert(seq.end(), next.begin(), next.end());
  Qwen3Session fresh(m.config);
  const std::vector<float> all = model.forward(fresh, seq, true);
  const size_t V = vocab;
  ASSERT_EQ(after.size(), next.size() * V);
  EXPECT_EQ(std::memcmp(after.data(), all.data() + 11 * V, after.size() * sizeof(float)), 0);

  // truncate(0) is a fresh session too.
  s.truncate(0);
  const std::vector<float> again = model.forward(s, seq, true);
  EXPECT_EQ(std::memcmp(again.data(), all.data(), all.size() * sizeof(float)), 0);
}

TEST(Qwen3Model, RefusalsLeaveTheSessionUnchanged) {
  test::TempDir dir;
  generate_qwen3_checkpoint(tiny(dir.path(), true));
  Loaded m = load(dir.path());
  Qwen3Model model(m.config, m.weights, nullptr);
  Qwen3Session s(m.config, 10);
  const std::vector<uint32_t> four = {1, 2, 3, 4};
  model.forward(s, four, false);
  const std::vector<uint32_t> bad = {5, 300};
  EXPECT_FAILS_WITH(model.forward(s, bad, false), "token id 300", "vocabulary of 300");
  EXPECT_EQ(s.length(), 4);
  const std::vector<uint32_t> seven(7, 1);
  EXPECT_FAILS_WITH(model.forward(s, seven, false), "capacity of 10");
  EXPECT_EQ(s.length(), 4);
  EXPECT_FAILS_WITH(model.forward(s, std::span<const uint32_t>(), false), "no tokens");
  EXPECT_FAILS_WITH(s.truncate(5), "truncate to length 5", "holds 4");
  EXPECT_FAILS_WITH(s.truncate(-1), "truncate to length -1");
  EXPECT_EQ(s.length(), 4);
  // The default capacity is max_position_embeddings.
  EXPECT_EQ(Qwen3Session(m.config).capacity(), 64);
}

TEST(Qwen3Model, ShardedLoadsLikeSingleFile) {
  test::TempDir one, three;
  generate_qwen3_checkpoint(tiny(one.path(), false, 1));
  Qwen3GenerateResult r = generate_qwen3_checkpoint(tiny(three.path(), false, 3));
  EXPECT_EQ(r.shards, 3);
  EXPECT_TRUE(file_exists(three.file("model-00001-of-00003.safetensors")));
  EXPECT_TRUE(file_exists(three.file("model-00003-of-00003.safetensors")));
  EXPECT_TRUE(file_exists(three.file("model.safetensors.index.json")));
  EXPECT_FALSE(file_exists(three.file("model.safetensors")));
  Loaded a = load(one.path()), b = load(three.path());
  EXPECT_EQ(a.weights.embed.storage, b.weights.embed.storage);
  EXPECT_EQ(a.weights.lm_head.storage, b.weights.lm_head.storage);
  for (size_t l = 0; l < a.weights.layers.size(); ++l) {
    EXPECT_EQ(a.weights.layers[l].attn.q.storage, b.weights.layers[l].attn.q.storage);
    EXPECT_EQ(a.weights.layers[l].down.storage, b.weights.layers[l].down.storage);
    EXPECT_EQ(a.weights.layers[l].attn.k_norm, b.weights.layers[l].attn.k_norm);
  }
  const std::vector<uint32_t> tokens = test::random_tokens(5, 6, 300);
  Qwen3Model ma(a.config, a.weights, nullptr), mb(b.config, b.weights, nullptr);
  Qwen3Session sa(a.config), sb(b.config);
  std::vector<float> la = ma.forward(sa, tokens, true), lb = mb.forward(sb, tokens, true);
  EXPECT_EQ(la, lb);

  // Index-less shards with deltafin's names load too (Checkpoint::open's path).
  fs::remove(three.file("model.safetensors.index.json"));
  for (int i = 1; i <= 3; ++i)
    fs::rename(three.file("model-0000" + std::to_string(i) + "-of-00003.safetensors"),
               three.file(shard_file_name(i, 3)));
  Loaded c = load(three.path());
  EXPECT_EQ(c.weights.embed.storage, a.weights.embed.storage);
  EXPECT_EQ(c.weights.layers[1].up.storage, a.weights.layers[1].up.storage);
}

// A matrix stored in another type is refused, naming the file and tensor.
TEST(Qwen3Model, LoaderRefusesOtherDtypes) {
  test::TempDir dir;
  generate_qwen3_checkpoint(tiny(dir.path(), true));
  const Qwen3Config c = read_qwen3_config(dir.file("config.json"));
  std::vector<TensorSpec> specs = qwen3_tensor_specs(c);
  for (TensorSpec& t : specs)
    if (t.name == "model.layers.0.self_attn.v_proj.weight") t.dtype = DType::F32;
  fs::remove(dir.file("model.safetensors"));
  SafetensorsWriter w(dir.file("model.safetensors"), specs);
  for (const TensorSpec& t : specs) {
    std::vector<uint8_t> zeros(t.bytes());
    w.append(zeros.data(), zeros.size());
  }
  w.commit();
  EXPECT_FAILS_WITH(load_qwen3_weights(c, dir.path()), "model.safetensors", "v_proj.weight", "F32", "expected BF16");
}

TEST(Qwen3Model, LoaderRefusesMismatches) {
  test::TempDir tied, untied;
  generate_qwen3_checkpoint(tiny(tied.path(), true));
  generate_qwen3_checkpoint(tiny(untied.path(), false, 2));
  Qwen3Config tc = read_qwen3_config(tied.file("config.json"));
  Qwen3Config uc = read_qwen3_config(untied.file("config.json"));
  // Untied config on a tied checkpoint: lm_head.weight is missing.
  EXPECT_FAILS_WITH(load_qwen3_weights(uc, tied.path()), "lm_head.weight", "missing");
  // Tied config on an untied checkpoint: lm_head.weight differs from the embeddings.
  EXPECT_FAILS_WITH(load_qwen3_weights(tc, untied.path()), "lm_head.weight", "differs");
  // A dimension the tensors do not have: the shard and tensor are named.
  Qwen3Config wide = tc;
  wide.intermediate_size = 128;
  EXPECT_FAILS_WITH(load_qwen3_weights(wide, tied.path()), "model.safetensors", "mlp.gate_proj.weight", "[96, 64]",
                    "[128, 64]");
  // Fewer layers than the checkpoint: the extra layer's tensors are refused.
  Qwen3Config shallow = tc;
  shallow.num_hidden_layers = 1;
  EXPECT_FAILS_WITH(load_qwen3_weights(shallow, tied.path()), "model.layers.1.", "not part of the Qwen3");
  // No checkpoint at all.
  test::TempDir empty;
  EXPECT_FAILS_WITH(load_qwen3_weights(tc, empty.path()), "no safetensors files");
}

}  // namespace
}  // namespace deltafin
