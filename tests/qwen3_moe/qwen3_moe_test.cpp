// Qwen3-MoE (model/qwen3_moe) on generated checkpoints in the Hugging Face
// layout: the released configs parse, the forward pass matches the
// independent float64 reference at every position (tied and untied, with
// dense layers, without renormalised routing, with YaRN) and greedily picks
// the reference's 32 tokens; a T-position pass equals T one-position passes
// bit for bit on every ISA path and thread count; experts reach the model
// only through its ExpertSource and their arrival order changes no bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/isa.h"
#include "model/common/greedy.h"
#include "model/qwen3/qwen3_attention.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "model/qwen3_moe/qwen3_moe_model.h"
#include "qwen3/reference_qwen3.h"
#include "support/batch_compare.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/token_text.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {
// A namespace of its own: the test binaries compile in unity batches
// (tests/CMakeLists.txt), where file-local names of two files would meet.
namespace qwen3_moe_test {
namespace {

using nlohmann::json;

// Qwen3-30B-A3B's config.json as released (Hugging Face Qwen/Qwen3-30B-A3B).
json released_30b_a3b() {
  return json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
    "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
    "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": false,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

TEST(Qwen3MoeConfig, ReadsTheReleasedConfigs) {
  const Qwen3MoeConfig c = parse_qwen3_moe_config(released_30b_a3b(), "config.json");
  EXPECT_EQ(c.base.hidden_size, 2048);
  EXPECT_EQ(c.base.num_hidden_layers, 48);
  EXPECT_EQ(c.base.kv_dim(), 4 * 128);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.moe_layers().size(), 48u);
  EXPECT_EQ(c.expert_record_bytes(), 3ull * 2048 * 768 * 2);
  EXPECT_EQ(c.base.eos_token_ids, std::vector<int64_t>{151645});
  // Training-only fields are listed, not silently consumed.
  for (const char* f : {"router_aux_loss_coef", "output_router_logits", "initializer_range"})
    EXPECT_NE(std::find(c.unused_fields.begin(), c.unused_fields.end(), f), c.unused_fields.end()) << f;

  // Qwen3-235B-A22B: the record the bench preset copies, 37.7 MB.
  json j = released_30b_a3b();
  j["hidden_size"] = 4096, j["intermediate_size"] = 12288, j["moe_intermediate_size"] = 1536;
  j["num_attention_heads"] = 64, j["num_hidden_layers"] = 94, j["max_window_layers"] = 94;
  const Qwen3MoeConfig big = parse_qwen3_moe_config(j, "config.json");
  EXPECT_EQ(big.expert_record_bytes(), 37748736u);
  EXPECT_EQ(qwen3_moe_preset("bench").hidden, 4096);
  EXPECT_EQ(qwen3_moe_preset("bench").moe_intermediate, 1536);
}

TEST(Qwen3MoeConfig, DecidesSparseLayersAsTransformers) {
  json j = released_30b_a3b();
  j["num_hidden_layers"] = 6, j["decoder_sparse_step"] = 2, j["mlp_only_layers"] = {3};
  const Qwen3MoeConfig c = parse_qwen3_moe_config(j, "config.json");
  // (l + 1) % 2 == 0 -> 1, 3, 5; 3 is mlp-only.
  EXPECT_EQ(c.moe_layers(), (std::vector<int64_t>{1, 5}));
}

// Found with fuzz_config's harness: num_hidden_layers = 2^40 sized a 128 GB
// table of layers (a bad_alloc, not a named error); a product of two widths
// wrapped expert_record_bytes(). Every dimension is at most 2^20 now.
TEST(Qwen3MoeConfig, DimensionsAreBounded) {
  json j = released_30b_a3b();
  j["num_hidden_layers"] = int64_t{1} << 40;
  j.erase("max_window_layers");
  EXPECT_FAILS_WITH(parse_qwen3_moe_config(j, "dir/config.json"), "dir/config.json",
                    "field num_hidden_layers = 1099511627776, expected <= 1048576");
  j = released_30b_a3b();
  j["moe_intermediate_size"] = int64_t{1} << 33;
  EXPECT_FAILS_WITH(parse_qwen3_moe_config(j, "dir/config.json"), "field moe_intermediate_size = 8589934592");
  j = released_30b_a3b();
  j["hidden_size"] = 1 << 20, j["moe_intermediate_size"] = 1 << 20, j["num_hidden_layers"] = 1 << 20;
  j["decoder_sparse_step"] = 1 << 19, j["mlp_only_layers"] = {(1 << 19) - 1};
  const Qwen3MoeConfig c = parse_qwen3_moe_config(j, "dir/config.json");  // the largest sizes allowed
  EXPECT_EQ(c.expert_record_bytes(), 6ull << 40);
  EXPECT_EQ(c.moe_layers(), (std::vector<int64_t>{(1 << 20) - 1}));  // layer 2^19 - 1 is mlp-only
}

TEST(Qwen3MoeConfig, RefusesWhatItDoesNotDescribe) {
  struct Case {
    const char* field;
    json value;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"model_type", "qwen3", "model_type"},
      {"architectures", {"Qwen2MoeForCausalLM"}, "architectures"},
      {"num_experts_per_tok", 129, "num_experts_per_tok"},
      {"mlp_only_layers", {48}, "mlp_only_layers"},
      {"mlp_only_layers", "all", "mlp_only_layers"},
      {"shared_expert_intermediate_size", 5632, "shared_expert_intermediate_size"},
      {"moe_intermediate_size", 0, "moe_intermediate_size"},
      {"hidden_act", "gelu", "hidden_act"},
      {"decoder_sparse_step", 49, "no layer is sparse"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.field);
    json j = released_30b_a3b();
    j[k.field] = k.value;
    try {
      parse_qwen3_moe_config(j, "dir/config.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dir/config.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(k.needle), std::string::npos) << e.what();
    }
  }
}

struct Loaded {
  Qwen3MoeConfig config;
  Checkpoint checkpoint;
  Qwen3MoeWeights weights;
  std::unique_ptr<ResidentExpertSource> experts;
};

std::unique_ptr<Loaded> load(const std::string& dir) {
  auto l = std::make_unique<Loaded>();
  l->config = read_qwen3_moe_config(dir + "/config.json");
  l->checkpoint = Checkpoint::open(dir);
  l->weights = load_qwen3_moe_weights(l->config, l->checkpoint);
  l->experts = load_resident_qwen3_moe_experts(l->config, l->checkpoint);
  return l;
}

Qwen3MoeGenerateOptions tiny(const std::string& dir, uint64_t seed) {
  Qwen3MoeGenerateOptions o;
  o.out_dir = dir;
  o.seed = seed;
  o.dims = qwen3_moe_preset("tiny");
  o.max_position_embeddings = 128;
  return o;
}

double relative_l2(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / den);
}

// As for Qwen3 dense (qwen3_model_test.cpp): fp32 rounding against float64
// on the same weights is a few 1e-7 relative; a wrong route, norm or RoPE
// pair is O(1).
constexpr double kTolerance = 1e-5;

// Every position within tolerance, then 32 greedy tokens equal to the
// reference's own greedy choices.
void expect_matches_reference(const Qwen3MoeGenerateOptions& o) {
  generate_qwen3_moe_checkpoint(o);
  std::unique_ptr<Loaded> m = load(o.out_dir);
  test::ReferenceQwen3 ref(o.out_dir);
  const size_t V = m->config.base.vocab_size;
  std::vector<uint32_t> tokens = test::random_tokens(o.seed + 11, 13, static_cast<uint32_t>(V));
  const std::vector<double> want = ref.logits(tokens);
  ThreadPool pool(2);
  Qwen3MoeModel model(m->config, m->weights, *m->experts, &pool);
  Qwen3Session session(m->config.base);
  const Rows got = model.forward(session, tokens, true);
  ASSERT_EQ(got.T, tokens.size());
  double worst = 0, rms = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const double e = relative_l2(got.row(t), want.data() + t * V, V);
    EXPECT_LE(e, kTolerance) << "position " << t;
    worst = std::max(worst, e);
  }
  for (size_t i = 0; i < V; ++i) rms += want[i] * want[i];
  EXPECT_GT(std::sqrt(rms / V), 0.1);  // not degenerate
  std::printf("worst relative L2 vs float64: %.3g\n", worst);

  // Greedy: the runtime decodes one token at a time from its cache; the
  // reference recomputes the whole sequence each time.
  uint32_t next = argmax_first(got.row(got.T - 1), V);
  std::vector<uint32_t> ref_seq = tokens;
  for (int i = 0; i < 32; ++i) {
    const std::vector<double> r = ref.logits(ref_seq);
    const double* last = r.data() + (ref_seq.size() - 1) * V;
    const uint32_t ref_next = static_cast<uint32_t>(std::max_element(last, last + V) - last);
    ASSERT_EQ(next, ref_next) << "token " << i;
    ref_seq.push_back(ref_next);
    const Rows one = model.forward(session, std::span<const uint32_t>(&next, 1), false);
    next = argmax_first(one.row(0), V);
  }
}

TEST(Qwen3MoeModel, UntiedShardedMatchesFloat64Reference) {
  test::TempDir dir;
  expect_matches_reference(tiny(dir.path(), 5));
}

TEST(Qwen3MoeModel, TiedSingleFileMatchesFloat64Reference) {
  test::TempDir dir;
  Qwen3MoeGenerateOptions o = tiny(dir.path(), 9);
  o.tie_word_embeddings = true;
  o.shards = 1;
  expect_matches_reference(o);
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/model.safetensors"));
}

TEST(Qwen3MoeModel, DenseLayersAndPlainRoutingMatchFloat64Reference) {
  test::TempDir dir;
  Qwen3MoeGenerateOptions o = tiny(dir.path(), 13);
  o.dims.layers = 4;
  o.dims.decoder_sparse_step = 2;  // layers 1 and 3 sparse ...
  o.dims.mlp_only_layers = {3};    // ... but 3 dense: one MoE layer among three dense ones
  o.dims.norm_topk_prob = false;
  o.dims.top_k = 3;
  expect_matches_reference(o);
  const Qwen3MoeConfig c = read_qwen3_moe_config(dir.path() + "/config.json");
  EXPECT_EQ(c.moe_layers(), std::vector<int64_t>{1});
}

TEST(Qwen3MoeModel, YarnMatchesFloat64Reference) {
  test::TempDir dir;
  Qwen3MoeGenerateOptions o = tiny(dir.path(), 17);
  // A short original context so the 13 + 32 positions reach the interpolated pairs.
  o.yarn_factor = 4.0;
  o.yarn_original_max_positions = 16;
  expect_matches_reference(o);
  const Qwen3MoeConfig c = read_qwen3_moe_config(dir.path() + "/config.json");
  EXPECT_TRUE(c.base.yarn.enabled);
}

TEST(Qwen3MoeModel, TPositionsEqualSinglePositionsOnEveryIsaAndThreadCount) {
  test::TempDir dir;
  generate_qwen3_moe_checkpoint(tiny(dir.path(), 21));
  std::unique_ptr<Loaded> m = load(dir.path());
  const size_t V = m->config.base.vocab_size;
  const std::vector<uint32_t> tokens = test::random_tokens(4, 19, static_cast<uint32_t>(V));
  ThreadPool pool(3);
  Qwen3MoeModel batched(m->config, m->weights, *m->experts, &pool);
  Qwen3Session s1(m->config.base);
  const Rows all = batched.forward(s1, tokens, true);

  const Isa best = detect_isa();
  std::vector<Isa> paths;  // scalar first
  for (Isa isa : kAllIsas)
    if (isa_supported(isa)) paths.push_back(isa);
  for (Isa isa : paths) {
    SCOPED_TRACE(isa_name(isa));
    set_active_isa(isa);
    Qwen3MoeModel single(m->config, m->weights, *m->experts, nullptr);
    Qwen3Session s2(m->config.base);
    for (size_t t = 0; t < tokens.size(); ++t) {
      const Rows one = single.forward(s2, std::span<const uint32_t>(&tokens[t], 1), false);
      ASSERT_EQ(one.n, V);
      EXPECT_EQ(std::memcmp(one.row(0), all.row(t), V * sizeof(float)), 0) << "position " << t;
    }
  }
  set_active_isa(best);
}

// A long pass runs its attention in blocks of kAttentionStopRows query rows
// and asks for a stop between them: the seams change no bit, and a stop
// asked inside a layer's attention ends the pass there, committing nothing.
TEST(Qwen3MoeModel, AttentionBlocksChangeNoBitAndAStopIsSeenInsideALayer) {
  test::TempDir dir;
  Qwen3MoeGenerateOptions o = tiny(dir.path(), 22);
  o.max_position_embeddings = 512;
  generate_qwen3_moe_checkpoint(o);
  std::unique_ptr<Loaded> m = load(dir.path());
  const size_t V = m->config.base.vocab_size;
  const size_t T = 2 * kAttentionStopRows + 22;
  const std::vector<uint32_t> tokens = test::random_tokens(5, T, static_cast<uint32_t>(V));
  Qwen3MoeModel model(m->config, m->weights, *m->experts, nullptr);
  Qwen3Session whole(m->config.base);
  const Rows all = model.forward(whole, tokens, true);
  Qwen3Session steps(m->config.base);
  for (size_t t = 0; t < T; ++t) {
    const Rows one = model.forward(steps, std::span<const uint32_t>(&tokens[t], 1), false);
    ASSERT_EQ(std::memcmp(one.row(0), all.row(t), V * sizeof(float)), 0) << "position " << t;
  }

  Qwen3Session s(m->config.base);
  int64_t layer_now = -1;
  int asks_in_layer_1 = 0;
  PassShape shape;
  shape.poll_interval = std::chrono::microseconds(0);
  shape.on_layer = [&](int64_t layer) { layer_now = layer; };
  // The first ask in layer 1 is the one before it; the second comes from
  // inside its attention.
  shape.cancelled = [&] { return layer_now == 1 && ++asks_in_layer_1 >= 2; };
  const Rows none = model.forward(s, tokens, false, shape);
  EXPECT_EQ(none.T, 0u);
  EXPECT_EQ(layer_now, 1) << "the stop was not seen inside layer 1";
  EXPECT_EQ(s.length(), 0);
  const Rows again = model.forward(s, tokens, true);
  EXPECT_EQ(std::memcmp(again.v.data(), all.v.data(), all.v.size() * sizeof(float)), 0);
}

// An ExpertSource that hands experts over in reverse order, a few at a time, and records what
// was asked for.
class ReversedSource : public ExpertSource {
public:
  explicit ReversedSource(ExpertSource& inner) : inner_(inner) {}
  ExpertHandle get(int64_t layer, int64_t expert) override {
    asked[layer].insert(expert);
    return inner_.get(layer, expert);
  }
  // Reversed, in groups of up to three.
  void for_each_ready_group(int64_t layer, std::span<const int64_t> experts,
                            const std::function<void(std::span<const ReadyExpert>)>& use) override {
    std::vector<ExpertHandle> held;
    std::vector<ReadyExpert> group;
    for (size_t i = experts.size(); i-- > 0;) {
      held.push_back(get(layer, experts[i]));
      group.push_back({i, held.back().data});
      if (group.size() == 3 || i == 0) use(group), group.clear();
    }
  }
  std::map<int64_t, std::set<int64_t>> asked;

private:
  ExpertSource& inner_;
};

TEST(Qwen3MoeModel, ExpertsComeOnlyFromTheSourceInAnyOrder) {
  test::TempDir dir;
  Qwen3MoeGenerateOptions o = tiny(dir.path(), 23);
  o.dims.layers = 3, o.dims.mlp_only_layers = {0};
  generate_qwen3_moe_checkpoint(o);
  std::unique_ptr<Loaded> m = load(dir.path());
  const std::vector<uint32_t> tokens = test::random_tokens(6, 9, static_cast<uint32_t>(m->config.base.vocab_size));
  Qwen3MoeModel plain(m->config, m->weights, *m->experts, nullptr);
  Qwen3Session s1(m->config.base);
  const Rows want = plain.forward(s1, tokens, true);

  ReversedSource reversed(*m->experts);
  Qwen3MoeModel model(m->config, m->weights, reversed, nullptr);
  Qwen3Session s2(m->config.base);
  const Rows got = model.forward(s2, tokens, true);
  EXPECT_EQ(std::memcmp(got.v.data(), want.v.data(), want.v.size() * sizeof(float)), 0);
  // Exactly the union of the routes was asked for, and nothing for the dense layer 0.
  EXPECT_EQ(reversed.asked.count(0), 0u);
  for (int64_t l : m->config.moe_layers()) {
    std::set<int64_t> routed;
    for (const Route& r : model.last_routes()[static_cast<size_t>(l)]) {
      ASSERT_EQ(r.experts.size(), 2u);
      EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0f, 1e-6f);  // norm_topk_prob
      EXPECT_GE(r.weights[0], r.weights[1]);                  // decided order
      routed.insert(r.experts.begin(), r.experts.end());
    }
    EXPECT_EQ(reversed.asked[l], routed) << "layer " << l;
  }
}

// Every preset's vocabulary can be trained from the built-in text (the
// generator fails before writing otherwise); the sizes here are shrunk, the
// vocabulary and the attention shape are the preset's.
TEST(Qwen3MoeGenerator, EveryPresetGenerates) {
  for (const char* preset : {"tiny", "small", "bench"}) {
    SCOPED_TRACE(preset);
    test::TempDir dir;
    Qwen3MoeGenerateOptions o;
    o.out_dir = dir.path();
    o.dims = qwen3_moe_preset(preset);
    const int64_t vocab = o.dims.vocab;
    o.dims.hidden = 64, o.dims.heads = 4, o.dims.kv_heads = 2, o.dims.head_dim = 16;
    o.dims.layers = 1, o.dims.experts = 4, o.dims.top_k = 2, o.dims.moe_intermediate = 16, o.dims.intermediate = 32;
    const Qwen3MoeGenerateResult r = generate_qwen3_moe_checkpoint(o);
    EXPECT_EQ(r.config.base.vocab_size, vocab);
    std::unique_ptr<Loaded> m = load(dir.path());
    EXPECT_EQ(m->config.num_experts, 4);
  }
}

// Qwen checkpoints pad vocab_size past the tokenizer; such an id decodes to
// no text instead of stopping a run.
TEST(Qwen3MoeTokenizer, IdsPastTheTokenizerDecodeToNothing) {
  test::TempDir dir;
  generate_qwen3_moe_checkpoint(tiny(dir.path(), 3));
  const HfTokenizer tok = HfTokenizer::load(dir.path() + "/tokenizer.json");
  const std::unique_ptr<TokenText> text = token_text(tok);
  EXPECT_EQ(text->vocab_size(), 320u);
  EXPECT_EQ(text->token_bytes(static_cast<uint32_t>('A')), "A");  // byte-level: the first 256 ids are bytes
  EXPECT_EQ(text->token_bytes(320), "");
  EXPECT_EQ(text->token_bytes(151935), "");
}

TEST(Qwen3MoeWeights, RefusesACheckpointOfAnotherArchitecture) {
  test::TempDir dir;
  generate_qwen3_moe_checkpoint(tiny(dir.path(), 3));
  // Claim one fewer expert: the checkpoint then holds tensors (expert 7's,
  // a router of 8 rows) the config does not describe.
  json j = json::parse(read_text_file(dir.path() + "/config.json"));
  j["num_experts"] = 7;
  write_file_atomic(dir.path() + "/config.json", j.dump());
  const Qwen3MoeConfig c = read_qwen3_moe_config(dir.path() + "/config.json");
  const Checkpoint ck = Checkpoint::open(dir.path());
  try {
    load_qwen3_moe_weights(c, ck);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.experts.7"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_qwen3_moe_expert_record(c, ck, 0, 7), Error);
}

// ---- several sessions in one pass (forward_batch) ---------------------------------

// The batch tests' checkpoint (3 layers, the first dense), made once.
const Loaded& batch_checkpoint() {
  static test::TempDir dir;
  static const std::unique_ptr<Loaded> m = [] {
    Qwen3MoeGenerateOptions o = tiny(dir.path(), 29);
    o.dims.layers = 3, o.dims.mlp_only_layers = {0};
    generate_qwen3_moe_checkpoint(o);
    return load(dir.path());
  }();
  return *m;
}

// Three sessions at different lengths, each beside its copy: 0 fresh, 1 with
// a 5-token prompt, 2 mid-decode (a 4-token prompt, then 2 tokens one by one).
test::BatchBeside three_sessions(CausalModel& model, uint32_t vocab) {
  test::BatchBeside b(model);
  b.add(model.new_session());
  auto prefilled = model.new_session();
  model.forward(*prefilled, test::random_tokens(31, 5, vocab), false);
  b.add(std::move(prefilled));
  auto decoding = model.new_session();
  model.forward(*decoding, test::random_tokens(32, 4, vocab), false);
  for (uint32_t t : test::random_tokens(33, 2, vocab)) model.forward(*decoding, std::span<const uint32_t>(&t, 1), false);
  b.add(std::move(decoding));
  return b;
}

// A decode row, a prompt with its last row's logits and a block with every
// row's, of sessions at three lengths, in one pass: each part's logits equal
// its solo pass's bit for bit; then a batch of three decode rows, a sliced
// batch (slice_rows is not used by this family: the same bits) and plain
// decoding after them agree too.
TEST(Qwen3MoeBatch, EachPartEqualsItsSoloPassAndTheSessionsAdvanceAlike) {
  const Loaded& m = batch_checkpoint();
  const uint32_t V = static_cast<uint32_t>(m.config.base.vocab_size);
  ThreadPool pool(2);
  Qwen3MoeModel model(m.config, m.weights, *m.experts, &pool);
  test::BatchBeside b = three_sessions(model, V);
  test::expect_batch_equals_solo(b, {{2, test::random_tokens(34, 1, V), false},
                                     {0, test::random_tokens(35, 6, V), false},
                                     {1, test::random_tokens(36, 4, V), true}});
  test::expect_batch_equals_solo(b, {{0, {7}, false}, {1, {8}, false}, {2, {9}, false}});
  PassShape sliced;
  sliced.slice_rows = 2;
  test::expect_batch_equals_solo(
      b, {{1, test::random_tokens(37, 5, V), true}, {2, test::random_tokens(38, 3, V), false}}, sliced);
  test::expect_sessions_agree(b, 10);
}

// Counts what the model asks of the source.
class CountingSource : public ExpertSource {
public:
  explicit CountingSource(ExpertSource& inner) : inner_(inner) {}
  ExpertHandle get(int64_t layer, int64_t expert) override {
    ++gets[{layer, expert}];
    return inner_.get(layer, expert);
  }
  void begin_pass(size_t positions) override { passes.push_back(positions); }
  std::map<std::pair<int64_t, int64_t>, int> gets;
  std::vector<size_t> passes;

private:
  ExpertSource& inner_;
};

// The routed experts run once on the stacked rows: each expert of the
// union of the parts' routes is asked for once in a layer, for all parts,
// and the source sees one pass of all the rows.
TEST(Qwen3MoeBatch, EachExpertIsAskedForOncePerLayerForAllParts) {
  const Loaded& m = batch_checkpoint();
  const uint32_t V = static_cast<uint32_t>(m.config.base.vocab_size);
  CountingSource counting(*m.experts);
  Qwen3MoeModel model(m.config, m.weights, counting, nullptr);
  test::BatchBeside b = three_sessions(model, V);
  counting.gets.clear(), counting.passes.clear();
  const std::vector<uint32_t> one = {5}, six = test::random_tokens(39, 6, V), four = test::random_tokens(40, 4, V);
  model.forward_batch(std::vector<BatchPart>{{b.batched[2].get(), one}, {b.batched[0].get(), six}, {b.batched[1].get(), four, true}});
  EXPECT_EQ(counting.passes, std::vector<size_t>{11});
  std::map<std::pair<int64_t, int64_t>, int> want;
  for (int64_t l : m.config.moe_layers()) {
    ASSERT_EQ(model.last_routes()[static_cast<size_t>(l)].size(), 11u);  // the stacked rows'
    for (const Route& r : model.last_routes()[static_cast<size_t>(l)])
      for (int64_t e : r.experts) want[{l, e}] = 1;
  }
  EXPECT_EQ(counting.gets, want);
  // Alone, the parts ask for their experts once each: more in all.
  counting.gets.clear();
  model.forward(*b.solo[2], one, false);
  model.forward(*b.solo[0], six, false);
  model.forward(*b.solo[1], four, true);
  int alone = 0;
  for (const auto& [key, n] : counting.gets) alone += n;
  EXPECT_GT(alone, static_cast<int>(want.size()));
}

// A stop inside a layer's attention: an empty answer, nothing committed to
// any session; the same batch then runs as if it had never started.
TEST(Qwen3MoeBatch, ACancelledBatchCommitsNothing) {
  const Loaded& m = batch_checkpoint();
  const uint32_t V = static_cast<uint32_t>(m.config.base.vocab_size);
  Qwen3MoeModel model(m.config, m.weights, *m.experts, nullptr);
  test::BatchBeside b = three_sessions(model, V);
  const std::vector<uint32_t> many = test::random_tokens(41, 5, V), one = {3};
  PassShape stop;
  stop.poll_interval = std::chrono::microseconds(0);
  int64_t layer_now = -1;
  int asks_in_layer_1 = 0;
  stop.on_layer = [&](int64_t layer) { layer_now = layer; };
  stop.cancelled = [&] { return layer_now == 1 && ++asks_in_layer_1 >= 2; };
  EXPECT_TRUE(model.forward_batch(std::vector<BatchPart>{{b.batched[0].get(), many, true}, {b.batched[2].get(), one}}, stop)
                  .empty());
  EXPECT_EQ(layer_now, 1);
  EXPECT_EQ(b.batched[0]->length(), 0);
  EXPECT_EQ(b.batched[2]->length(), 6);
  test::expect_batch_equals_solo(b, {{0, many, true}, {2, one, false}});
}

TEST(Qwen3MoeBatch, RefusesBadPartsNamingThem) {
  const Loaded& m = batch_checkpoint();
  Qwen3MoeModel model(m.config, m.weights, *m.experts, nullptr);
  auto a = model.new_session(), b = model.new_session();
  const std::vector<uint32_t> ok = {1, 2}, bad = {3, 320}, none;
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {b.get(), bad}}), "batch part 1",
                    "token id 320 at offset 1 is outside the vocabulary of 320");
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{a.get(), none}, {b.get(), ok}}), "batch part 0", "no tokens");
  EXPECT_FAILS_WITH(model.forward_batch(std::vector<BatchPart>{{a.get(), ok}, {a.get(), ok}}), "share a session");
  EXPECT_EQ(a->length(), 0);
  EXPECT_EQ(b->length(), 0);
}

// Verification state is each session's: A verifies, B verifies, then each
// keeps part of its pass (in either order) and ends exactly as verifying and
// keeping alone leaves its copy.
TEST(Qwen3MoeBatch, InterleavedVerificationsKeepWhatEachAloneKeeps) {
  const Loaded& m = batch_checkpoint();
  const uint32_t V = static_cast<uint32_t>(m.config.base.vocab_size);
  Qwen3MoeModel model(m.config, m.weights, *m.experts, nullptr);
  test::BatchBeside b(model);
  for (uint64_t seed : {43, 44}) {
    auto s = model.new_session();
    model.forward(*s, test::random_tokens(seed, 4 + seed % 3, V), false);
    b.add(std::move(s));
  }
  const std::vector<uint32_t> draft_a = test::random_tokens(45, 4, V), draft_b = test::random_tokens(46, 5, V);
  for (bool a_first : {true, false}) {
    SCOPED_TRACE(a_first ? "A kept first" : "B kept first");
    const Rows la = model.forward_verify(*b.batched[0], draft_a);
    const Rows lb = model.forward_verify(*b.batched[1], draft_b);
    if (a_first) {
      model.keep_verified(*b.batched[0], 2);
      model.keep_verified(*b.batched[1], 3);
    } else {
      model.keep_verified(*b.batched[1], 5);
      model.keep_verified(*b.batched[0], 1);
    }
    const Rows la_alone = model.forward_verify(*b.solo[0], draft_a);
    model.keep_verified(*b.solo[0], a_first ? 2 : 1);
    const Rows lb_alone = model.forward_verify(*b.solo[1], draft_b);
    model.keep_verified(*b.solo[1], a_first ? 3 : 5);
    EXPECT_TRUE(test::same_bits(la, la_alone));
    EXPECT_TRUE(test::same_bits(lb, lb_alone));
    test::expect_sessions_agree(b, 12);
  }
}

}  // namespace
}  // namespace qwen3_moe_test
}  // namespace deltafin
