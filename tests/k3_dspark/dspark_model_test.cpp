// The DSpark draft model (src/model/k3_dspark/model.h) on a generated drafter for
// the tiny K3 (k3-model.md §14), fed real captured rows of that K3:
// - the context cache and the proposal (final rows, scores, confidence,
//   tokens) against the independent float64 reference (reference_dspark.h);
// - context append/truncate semantics, bit for bit;
// - load errors for broken checkpoints, and the generator's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/kimi_k3/load/loaded_k3.h"
#include "format/checkpoint.h"
#include "format/safetensors_writer.h"
#include "model/kimi_k3/generator.h"
#include "model/k3_dspark/generator.h"
#include "model/k3_dspark/model.h"
#include "k3_dspark/reference_dspark.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"
#include "util/thread_pool.h"

using namespace deltafin;
namespace fs = std::filesystem;
using test::Vec;

namespace {

// Tolerances against the float64 reference. DSpark rounds every activation
// to BF16 (unit roundoff u = 2^-8 = 0.0039); the reference rounds nothing.
// One rounding is a relative error <= u, about u/sqrt(3) = 0.0023 RMS over a
// vector. A cache row passes ~6 roundings (context_proj, context norm twice,
// kv_a, kv_a norm twice or the rotation): ~sqrt(6)·0.0023 = 0.006 relative L2
// (measured 0.005). The final rows pass ~15 roundings per layer (q and kv
// paths, BF16 probabilities, the latent read, MLP) and the residual stream
// carries them: measured 0.018 (output rows) and 0.013 (scores). Bounds, with
// 3-5x headroom for other seeds and platforms: 2.5% relative L2 for cache
// rows, 6% for output rows and scores. Absolute: scores are O(1) logits;
// the largest |score error| measured is 0.062, bounded by kScoreAbs = 0.1.
// Hence tokens must agree wherever the reference's top-2 margin exceeds
// 2·kScoreAbs: an error below kScoreAbs on both candidates cannot swap them.
// Confidence (one dot over h + rank values) measured 0.021, bounded by 0.1.
constexpr double kCacheRelL2 = 0.025;
constexpr double kOutputRelL2 = 0.06;
constexpr double kScoreRelL2 = 0.06;
constexpr double kScoreAbs = 0.1;
constexpr double kClearMargin = 2 * kScoreAbs;
constexpr double kConfidenceAbs = 0.1;

double rel_l2(const float* got, const Vec& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double d = got[i] - want[i];
    num += d * d, den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

Rows first_rows(const Rows& r, size_t begin, size_t end) {
  Rows out(end - begin, r.n);
  std::memcpy(out.v.data(), r.row(begin), (end - begin) * r.n * sizeof(float));
  return out;
}

std::vector<Vec> to_double(const Rows& r) {
  std::vector<Vec> out;
  for (size_t t = 0; t < r.T; ++t) out.emplace_back(r.row(t), r.row(t) + r.n);
  return out;
}

// A tiny K3, its drafter and the captured rows of two related prompts.
struct Fixture {
  test::TempDir root;
  std::string k3_dir, dspark_dir;
  std::unique_ptr<LoadedK3> k3;
  DSparkConfig config;
  DSparkWeights weights;
  std::unique_ptr<ThreadPool> pool;
  Rows rows_a;  // 10 tokens
  Rows rows_b;  // 12 tokens: the first 6 of A, then 6 others

  Fixture() {
    k3_dir = root.path() + "/k3";
    dspark_dir = root.path() + "/dspark";
    GenerateOptions o;
    o.out_dir = k3_dir;
    o.seed = 11;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
    DSparkGenerateOptions d;
    d.layers = 3;
    config = generate_dspark_checkpoint(k3_dir, dspark_dir, 7, d);
    k3 = load_k3_resident(k3_dir, 2);
    DSparkConfig read = read_dspark_config(dspark_dir + "/config.json");
    validate_dspark_for_target(read, k3->config, dspark_dir + "/config.json");
    weights = load_dspark_weights(dspark_dir, read);
    pool = std::make_unique<ThreadPool>(2);
    k3->model->set_capture_layers(config.target_layer_ids);
    std::vector<uint32_t> a = test::random_tokens(3, 10, 500), b = a;
    b.resize(6);
    for (uint32_t t : test::random_tokens(4, 6, 500)) b.push_back(t);
    rows_a = capture(a);
    rows_b = capture(b);
  }

  Rows capture(const std::vector<uint32_t>& tokens) {
    K3Session s(k3->config);
    k3->model->forward(s, tokens, false);
    return k3->model->captured();
  }

  DSparkModel model(ThreadPool* p) { return DSparkModel(config, weights, k3->weights, p); }
};

Fixture& fx() {
  static Fixture f;
  return f;
}

// The largest errors seen, printed so the tolerances can be judged.
struct Worst {
  double output = 0, score = 0, score_abs = 0, confidence = 0;
  int clear = 0, unclear = 0;  // rows whose tokens were / were not compared
  void print(const char* what) const {
    std::printf("%s: worst rel. L2 output %.4f, scores %.4f; worst |score error| %.4f; |confidence error| %.4f; "
                "%d rows with a clear margin, %d without\n",
                what, output, score, score_abs, confidence, clear, unclear);
  }
};

// Compares one proposal of `m` with the reference fed the same context.
void expect_matches_reference(DSparkModel& m, const test::ReferenceDSpark& ref, uint32_t anchor, int n, Worst* w) {
  SCOPED_TRACE("context " + std::to_string(m.context_length()) + ", anchor " + std::to_string(anchor) + ", n " +
               std::to_string(n));
  DSparkModel::Proposal p = m.propose(anchor, n);
  ASSERT_EQ(p.tokens.size(), static_cast<size_t>(n));
  ASSERT_EQ(p.confidence.size(), static_cast<size_t>(n));
  // Condition the reference's Markov bias on the model's own drafts, so every
  // row is compared for the same previous token.
  test::ReferenceDSpark::Result r = ref.propose(anchor, n, p.tokens);
  const Rows& out = m.last_output();
  ASSERT_EQ(out.T, 7u);
  for (size_t t = 0; t < 7; ++t) {
    const double e = rel_l2(out.row(t), r.out[t]);
    w->output = std::max(w->output, e);
    EXPECT_LE(e, kOutputRelL2) << "row " << t;
  }
  const Rows& s = m.last_scores();
  ASSERT_EQ(s.T, static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    const double e = rel_l2(s.row(j), r.scores[j]);
    w->score = std::max(w->score, e);
    EXPECT_LE(e, kScoreRelL2) << "row " << j;
    for (size_t v = 0; v < r.scores[j].size(); ++v) {
      const double d = std::fabs(s.row(j)[v] - r.scores[j][v]);
      w->score_abs = std::max(w->score_abs, d);
      ASSERT_LE(d, kScoreAbs) << "row " << j << ", token " << v;
    }
    w->confidence = std::max(w->confidence, std::fabs(p.confidence[j] - r.confidence[j]));
    EXPECT_NEAR(p.confidence[j], r.confidence[j], kConfidenceAbs) << "row " << j;
    (r.margin[j] > kClearMargin ? w->clear : w->unclear)++;
    if (r.margin[j] > kClearMargin) {
      EXPECT_EQ(p.tokens[j], r.tokens[j]) << "row " << j << ", margin " << r.margin[j];
    }
  }
}

}  // namespace

TEST(DSparkModel, ContextCacheMatchesReference) {
  Fixture& f = fx();
  DSparkModel m = f.model(f.pool.get());
  test::ReferenceDSpark ref(f.dspark_dir, f.k3_dir);
  m.append_context(f.rows_a, 4);
  m.append_context(first_rows(f.rows_a, 4, 10), 6);
  ref.append_context(to_double(f.rows_a));
  ASSERT_EQ(m.context_length(), 10);
  double worst = 0;
  const size_t r = static_cast<size_t>(f.config.kv_lora_rank), kw = r + static_cast<size_t>(f.config.qk_rope_head_dim);
  for (int l = 0; l < f.config.num_hidden_layers; ++l) {
    const std::vector<float>& cache = m.context_cache(l);
    ASSERT_EQ(cache.size(), 10 * kw);
    for (size_t j = 0; j < 10; ++j) {
      Vec want = ref.latent(l)[j];
      want.insert(want.end(), ref.k_rope(l)[j].begin(), ref.k_rope(l)[j].end());
      const double e = rel_l2(cache.data() + j * kw, want);
      worst = std::max(worst, e);
      EXPECT_LE(e, kCacheRelL2) << "layer " << l << ", position " << j;
      for (size_t i = 0; i < kw; ++i)  // stored as BF16 values
        ASSERT_EQ(cache[j * kw + i], bf16_to_f32(f32_to_bf16(cache[j * kw + i])));
    }
  }
  std::printf("cache rows: worst rel. L2 %.4f\n", worst);
}

TEST(DSparkModel, ProposalMatchesReference) {
  Fixture& f = fx();
  DSparkModel m = f.model(f.pool.get());
  test::ReferenceDSpark ref(f.dspark_dir, f.k3_dir);
  Worst worst;
  // Empty context: the 7 query rows attend only to each other.
  expect_matches_reference(m, ref, 17, 7, &worst);
  m.append_context(f.rows_b, 12);
  ref.append_context(to_double(f.rows_b));
  for (uint32_t anchor : {5u, 44u, 300u, 301u, 511u, 512u /* [BOS] */, 765u /* the mask token itself */})
    expect_matches_reference(m, ref, anchor, 7, &worst);
  expect_matches_reference(m, ref, 42, 1, &worst);
  expect_matches_reference(m, ref, 42, 3, &worst);
  worst.print("3 layers");
  EXPECT_GE(worst.clear, 20);  // the token comparison is not vacuous
}

TEST(DSparkModel, ProposalWithFiveLayersMatchesReference) {
  Fixture& f = fx();
  test::TempDir dir;
  DSparkGenerateOptions o;
  o.layers = 5;
  DSparkConfig c = generate_dspark_checkpoint(f.k3_dir, dir.path(), 99, o);
  DSparkWeights w = load_dspark_weights(dir.path(), c);
  DSparkModel m(c, w, f.k3->weights, nullptr);
  test::ReferenceDSpark ref(dir.path(), f.k3_dir);
  m.append_context(f.rows_a, 10);
  ref.append_context(to_double(f.rows_a));
  Worst worst;
  expect_matches_reference(m, ref, 100, 7, &worst);
  expect_matches_reference(m, ref, 7, 7, &worst);
  worst.print("5 layers");
}

TEST(DSparkModel, TruncateThenAppendEqualsAFreshModel) {
  Fixture& f = fx();
  // A: context A (10 rows), then the verifier rejects the last 4: truncate to
  // 6 and append B's rows 6..11. B: a fresh model fed the same 12 rows (A's
  // 0..5, B's 6..11) at once. C: those rows in chunks of 1, 5 and 6. All three
  // must be identical bit for bit (B runs without a thread pool).
  Rows mixed(12, f.rows_a.n);
  std::memcpy(mixed.row(0), f.rows_a.row(0), 6 * mixed.n * sizeof(float));
  std::memcpy(mixed.row(6), f.rows_b.row(6), 6 * mixed.n * sizeof(float));
  DSparkModel a = f.model(f.pool.get()), b = f.model(nullptr), c = f.model(f.pool.get());
  a.append_context(f.rows_a, 10);
  a.truncate_context(6);
  EXPECT_EQ(a.context_length(), 6);
  a.append_context(first_rows(f.rows_b, 6, 12), 6);
  b.append_context(mixed, 12);
  c.append_context(mixed, 1);
  c.append_context(first_rows(mixed, 1, 6), 5);
  c.append_context(first_rows(mixed, 6, 12), 6);
  for (DSparkModel* m : {&a, &c}) {
    ASSERT_EQ(m->context_length(), 12);
    for (int l = 0; l < f.config.num_hidden_layers; ++l) {
      ASSERT_EQ(m->context_cache(l).size(), b.context_cache(l).size());
      EXPECT_EQ(std::memcmp(m->context_cache(l).data(), b.context_cache(l).data(), b.context_cache(l).size() * 4), 0)
          << "layer " << l;
    }
  }
  DSparkModel::Proposal pa = a.propose(9, 7), pb = b.propose(9, 7), pc = c.propose(9, 7);
  EXPECT_EQ(pa.tokens, pb.tokens);
  EXPECT_EQ(pc.tokens, pb.tokens);
  EXPECT_EQ(std::memcmp(pa.confidence.data(), pb.confidence.data(), 7 * 4), 0);
  for (DSparkModel* m : {&a, &c}) {
    EXPECT_EQ(std::memcmp(m->last_output().v.data(), b.last_output().v.data(), b.last_output().v.size() * 4), 0);
    EXPECT_EQ(std::memcmp(m->last_scores().v.data(), b.last_scores().v.data(), b.last_scores().v.size() * 4), 0);
  }
  // Truncating everything gives the empty model back.
  a.truncate_context(0);
  DSparkModel fresh = f.model(nullptr);
  a.propose(9, 7);
  fresh.propose(9, 7);
  EXPECT_EQ(std::memcmp(a.last_scores().v.data(), fresh.last_scores().v.data(), fresh.last_scores().v.size() * 4), 0);
  for (int l = 0; l < f.config.num_hidden_layers; ++l) EXPECT_TRUE(a.context_cache(l).empty());
}

TEST(DSparkModel, MisuseIsRefused) {
  Fixture& f = fx();
  DSparkModel m = f.model(nullptr);
  m.append_context(f.rows_a, 3);
  EXPECT_FAILS_WITH(m.truncate_context(4), "cannot truncate the context to 4 rows (it holds 3)");
  EXPECT_FAILS_WITH(m.truncate_context(-1), "cannot truncate the context to -1 rows");
  EXPECT_FAILS_WITH(m.append_context(f.rows_a, 11), "11 context rows requested from 10 captured rows");
  Rows narrow(2, 64);
  EXPECT_FAILS_WITH(m.append_context(narrow, 1), "captured rows have width 64, expected", "320");
  EXPECT_FAILS_WITH(m.propose(1, 0), "0 drafts requested, expected 1..7");
  EXPECT_FAILS_WITH(m.propose(1, 8), "8 drafts requested, expected 1..7");
  EXPECT_FAILS_WITH(m.propose(768, 1), "anchor token 768 is outside the vocabulary of 768");
  EXPECT_EQ(m.context_length(), 3);
  EXPECT_EQ(m.target_layers(), (std::vector<int64_t>{1, 3, 5, 7, 9}));
}

// --- checkpoints -----------------------------------------------------------

namespace {

// Rewrites dir/model.safetensors through `edit`, which may drop, reshape or
// add tensors (payload bytes are kept where the size allows, else zero-filled).
struct Edit {
  std::string drop, reshape;
  std::vector<uint64_t> new_shape;
  std::string retype;  // to F32
  std::string add;     // an extra [4] tensor
};

Edit drop(const std::string& name) {
  Edit e;
  e.drop = name;
  return e;
}
Edit reshape(const std::string& name, std::vector<uint64_t> shape) {
  Edit e;
  e.reshape = name;
  e.new_shape = std::move(shape);
  return e;
}
Edit retype(const std::string& name) {
  Edit e;
  e.retype = name;
  return e;
}
Edit add(const std::string& name) {
  Edit e;
  e.add = name;
  return e;
}

void rewrite(const std::string& dir, const Edit& e) {
  const std::string path = dir + "/model.safetensors";
  std::vector<TensorSpec> specs;
  std::vector<std::vector<uint8_t>> payloads;
  {
    SafetensorsFile in = SafetensorsFile::open(path);
    for (const TensorInfo& t : in.tensors()) {
      if (t.name == e.drop) continue;
      TensorSpec s{t.name, t.dtype, t.shape};
      if (t.name == e.reshape) s.shape = e.new_shape;
      if (t.name == e.retype) s.dtype = DType::F32;
      std::vector<uint8_t> bytes(t.bytes());
      in.read(t, bytes.data());
      bytes.resize(s.bytes(), 0);
      specs.push_back(s);
      payloads.push_back(bytes);
    }
  }
  if (!e.add.empty()) {
    specs.push_back({e.add, DType::BF16, {4}});
    payloads.emplace_back(8, 0);
  }
  SafetensorsWriter w(path, specs);
  for (const auto& p : payloads) w.append(p.data(), p.size());
  w.commit();
}

std::string load_error(const std::string& dir, const DSparkConfig& c) {
  try {
    load_dspark_weights(dir, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DSparkCheckpoint, BrokenCheckpointsNameTensorAndFile) {
  Fixture& f = fx();
  test::TempDir dir;
  const std::string file = dir.path() + "/model.safetensors";
  auto fresh = [&] {
    fs::remove(dir.path() + "/config.json");
    fs::remove(file);
    return generate_dspark_checkpoint(f.k3_dir, dir.path(), 3);
  };
  DSparkConfig c = fresh();
  EXPECT_EQ(load_error(dir.path(), c), "");

  rewrite(dir.path(), drop("layers.1.self_attn.kv_b_proj.weight"));
  EXPECT_EQ(load_error(dir.path(), c),
            dir.path() + ": tensor layers.1.self_attn.kv_b_proj.weight is missing from the DSpark checkpoint");

  c = fresh();
  rewrite(dir.path(), reshape("final_norm.weight", {65}));
  EXPECT_EQ(load_error(dir.path(), c), file + ": tensor final_norm.weight has shape [65], expected [64]");

  c = fresh();
  rewrite(dir.path(), reshape("context_proj.weight", {64, 256}));
  EXPECT_EQ(load_error(dir.path(), c), file + ": tensor context_proj.weight has shape [64, 256], expected [64, 320]");

  c = fresh();  // embed_tokens is not kept but still checked
  rewrite(dir.path(), reshape("embed_tokens.weight", {767, 64}));
  EXPECT_EQ(load_error(dir.path(), c), file + ": tensor embed_tokens.weight has shape [767, 64], expected [768, 64]");

  c = fresh();
  rewrite(dir.path(), retype("confidence_head.proj.bias"));
  EXPECT_EQ(load_error(dir.path(), c), file + ": tensor confidence_head.proj.bias has dtype F32, expected BF16");

  c = fresh();
  rewrite(dir.path(), add("lm_head.weight"));
  EXPECT_EQ(load_error(dir.path(), c), file + ": tensor lm_head.weight is not part of a DSpark checkpoint");
}

TEST(DSparkCheckpoint, GeneratorCopiesTheEmbeddingAndWritesAtomically) {
  Fixture& f = fx();
  // embed_tokens is byte-identical to the target's.
  Checkpoint target = Checkpoint::open(f.k3_dir), draft = Checkpoint::open(f.dspark_dir);
  TensorRef te = target.find("language_model.model.embed_tokens.weight"), de = draft.find("embed_tokens.weight");
  ASSERT_TRUE(te && de);
  std::vector<uint8_t> a(te.info->bytes()), b(de.info->bytes());
  te.shard->read(*te.info, a.data());
  de.shard->read(*de.info, b.data());
  EXPECT_EQ(a, b);
  // context_proj, context_norm, final_norm, embed_tokens, markov w1/w2,
  // confidence weight/bias, and 12 per layer (the real drafter: 8 + 12·5 = 68).
  EXPECT_EQ(draft.tensor_count(), 8u + 12u * 3u);
  // Exactly config.json and model.safetensors: no temporary left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(f.dspark_dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model.safetensors"}));
  // An existing drafter is not overwritten without force; with it, the same seed gives the same bytes.
  EXPECT_FAILS_WITH(generate_dspark_checkpoint(f.k3_dir, f.dspark_dir, 7), "already holds checkpoint files",
                    "--force");
  test::TempDir again;
  DSparkGenerateOptions o;
  o.layers = 3;
  generate_dspark_checkpoint(f.k3_dir, again.path(), 7, o);
  EXPECT_EQ(read_text_file(again.path() + "/config.json"), read_text_file(f.dspark_dir + "/config.json"));
  EXPECT_EQ(read_text_file(again.path() + "/model.safetensors"), read_text_file(f.dspark_dir + "/model.safetensors"));
}

TEST(DSparkCheckpoint, MakeModelCommand) {
  Fixture& f = fx();
  test::TempDir dir;
  std::string out;
  const std::string bin = test::shell_quote(test::deltafin_binary());
  int rc = test::run_command(bin + " make-model --arch k3_dspark --target " + test::shell_quote(f.k3_dir) +
                                 " --out " + test::shell_quote(dir.path() + "/d") + " --seed 5 --layers 4 2>&1",
                             &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("DSpark drafter"), std::string::npos) << out;
  DSparkConfig c = read_dspark_config(dir.path() + "/d/config.json");
  EXPECT_EQ(c.num_hidden_layers, 4);
  validate_dspark_for_target(c, f.k3->config, "config.json");
  EXPECT_EQ(load_dspark_weights(dir.path() + "/d", c).layers.size(), 4u);
  rc = test::run_command(bin + " make-model --arch k3_dspark --out " + test::shell_quote(dir.path() + "/e") + " 2>&1",
                         &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("--target DIR (the K3 checkpoint to draft for) is required"), std::string::npos) << out;
}
