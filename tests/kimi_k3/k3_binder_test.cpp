// Binding a complete tiny K3-architecture checkpoint (k3-model.md §3, §5.1,
// §14): every tensor present with the dtype and shape its formula gives, the
// per-layer counts of §3.1, expert records as the six payloads concatenated,
// and a damaged checkpoint reported with every problem at once.
#include "model/kimi_k3/checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "support/k3_fixture.h"
#include "model/kimi_k3/tensors.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
using namespace deltafin::test;
using nlohmann::json;

namespace {

// The tiny checkpoint's tensor list: the language tensors, then one vision
// and one projector tensor (ignored by the binder).
std::vector<TensorSpec> tiny_tensors() {
  K3Config c = parse_k3_config(tiny_config_json(), "tiny");
  std::vector<TensorSpec> t = k3_language_tensors(c, /*r_f = head_dim*/ 32);
  t.push_back({"vision_tower.patch_embed.proj.weight", DType::BF16, {8, 3, 2, 2}});
  t.push_back({"mm_projector.linear_1.weight", DType::BF16, {64, 8}});
  return t;
}

std::string layer_of(const std::string& name) {
  const std::string p = "language_model.model.layers.";
  if (name.rfind(p, 0) != 0) return "";
  return name.substr(p.size(), name.find('.', p.size()) - p.size());
}

TensorSpec* find_spec(std::vector<TensorSpec>& v, const std::string& name) {
  for (TensorSpec& t : v)
    if (t.name == name) return &t;
  return nullptr;
}

void erase_spec(std::vector<TensorSpec>& v, const std::string& name) {
  auto it = std::find_if(v.begin(), v.end(), [&](const TensorSpec& t) { return t.name == name; });
  ASSERT_NE(it, v.end()) << name;
  v.erase(it);
}

}  // namespace

TEST(K3Binder, CompleteTinyCheckpointLoads) {
  TempDir dir;
  const json config = tiny_config_json();
  write_checkpoint_dir(dir.path(), tiny_tensors(), 2, /*index*/ true, &config);
  ASSERT_TRUE(file_exists(dir.file("model-00001-of-000002.safetensors")));
  ASSERT_TRUE(file_exists(dir.file("model-00002-of-000002.safetensors")));

  K3Checkpoint k = load_k3_checkpoint(dir.path());
  EXPECT_EQ(k.dir, dir.path());
  EXPECT_EQ(k.ignored_tensors, 2u);
  EXPECT_EQ(k.kda_gate_rank, 32);
  EXPECT_FALSE(k.pinned_revision);
  EXPECT_EQ(k.config.hidden_size, 64);
  EXPECT_EQ(k.tensors.shards().size(), 2u);

  // Counts per layer, §3.1: layer 0 has 23 spine tensors, other KDA layers 28,
  // MLA layers 22; MoE layers add 6 per expert (16 experts); 5 globals.
  std::map<std::string, size_t> per_layer;
  size_t globals = 0, vision = 0;
  for (const std::string& n : k.tensors.names()) {
    std::string l = layer_of(n);
    if (!l.empty())
      ++per_layer[l];
    else if (n.rfind("language_model.", 0) == 0)
      ++globals;
    else
      ++vision;
  }
  EXPECT_EQ(globals, 5u);
  EXPECT_EQ(vision, 2u);
  ASSERT_EQ(per_layer.size(), 10u);
  const size_t experts = 16 * 6;
  for (int i = 0; i < 10; ++i) {
    SCOPED_TRACE(i);
    size_t want = i == 0 ? 23 : (i == 3 || i == 7 || i == 9) ? 22 + experts : 28 + experts;
    EXPECT_EQ(per_layer[std::to_string(i)], want);
  }
  // 5 + 23 + 6*(28+96) + 3*(22+96) + 2 vision
  EXPECT_EQ(k.tensors.tensor_count(), 5u + 23 + 6 * 124 + 3 * 118 + 2);

  // A few shapes and dtypes by their §3 formulas with tiny dims.
  struct Want {
    std::string name;
    DType dtype;
    std::vector<uint64_t> shape;
  };
  const Want want[] = {
      {"language_model.model.embed_tokens.weight", DType::BF16, {768, 64}},
      {"language_model.lm_head.weight", DType::BF16, {768, 64}},
      {"language_model.model.output_attn_res_proj.weight", DType::BF16, {1, 64}},
      {"language_model.model.layers.0.mlp.gate_proj.weight", DType::BF16, {128, 64}},
      {"language_model.model.layers.0.mlp.down_proj.weight", DType::BF16, {64, 128}},
      {"language_model.model.layers.0.self_attn.A_log", DType::F32, {32}},
      {"language_model.model.layers.1.self_attn.dt_bias", DType::F32, {64}},
      {"language_model.model.layers.1.self_attn.k_conv1d.weight", DType::F32, {64, 1, 4}},
      {"language_model.model.layers.1.self_attn.f_a_proj.weight", DType::BF16, {32, 64}},
      {"language_model.model.layers.1.self_attn.f_b_proj.weight", DType::BF16, {64, 32}},
      {"language_model.model.layers.1.self_attn.b_proj.weight", DType::BF16, {2, 64}},
      {"language_model.model.layers.3.self_attn.q_b_proj.weight", DType::BF16, {48, 32}},
      {"language_model.model.layers.3.self_attn.kv_a_proj_with_mqa.weight", DType::BF16, {40, 64}},
      {"language_model.model.layers.3.self_attn.kv_b_proj.weight", DType::BF16, {64, 32}},
      {"language_model.model.layers.9.self_attn.g_proj.weight", DType::BF16, {32, 64}},
      {"language_model.model.layers.9.self_attn.o_proj.weight", DType::BF16, {64, 32}},
      {"language_model.model.layers.2.block_sparse_moe.gate.e_score_correction_bias", DType::F32, {16}},
      {"language_model.model.layers.2.block_sparse_moe.routed_expert_down_proj.weight", DType::BF16, {32, 64}},
      {"language_model.model.layers.2.block_sparse_moe.shared_experts.up_proj.weight", DType::BF16, {128, 64}},
      {"language_model.model.layers.2.block_sparse_moe.shared_experts.down_proj.weight", DType::BF16, {64, 128}},
      {"language_model.model.layers.9.block_sparse_moe.experts.15.w1.weight_packed", DType::U8, {64, 16}},
      {"language_model.model.layers.9.block_sparse_moe.experts.15.w1.weight_scale", DType::U8, {64, 1}},
      {"language_model.model.layers.9.block_sparse_moe.experts.15.w2.weight_packed", DType::U8, {32, 32}},
      {"language_model.model.layers.9.block_sparse_moe.experts.15.w2.weight_scale", DType::U8, {32, 2}},
  };
  for (const Want& w : want) {
    SCOPED_TRACE(w.name);
    TensorRef t = k.tensor(w.name);
    EXPECT_EQ(t.info->dtype, w.dtype);
    EXPECT_EQ(t.info->shape, w.shape);
  }
  EXPECT_FALSE(k.tensors.find("language_model.model.layers.0.block_sparse_moe.gate.weight"));
  EXPECT_FALSE(k.tensors.find("language_model.model.layers.3.self_attn.A_log"));
  EXPECT_FAILS_WITH(k.tensor("language_model.model.layers.0.mlp.experts"), dir.path(),
                    "'language_model.model.layers.0.mlp.experts'", "not found");
}

TEST(K3Binder, ExpertRecordIsTheSixPayloadsInOrder) {
  TempDir dir;
  const json config = tiny_config_json();
  write_checkpoint_dir(dir.path(), tiny_tensors(), 2, /*index*/ true, &config);
  K3Checkpoint k = load_k3_checkpoint(dir.path());

  // §5.1 with d_lat 32, I_moe 64: packed rows*cols/2, scale rows*cols/32.
  const std::pair<const char*, uint64_t> parts[] = {{"w1.weight_packed", 64 * 32 / 2}, {"w1.weight_scale", 64 * 32 / 32},
                                                    {"w2.weight_packed", 32 * 64 / 2}, {"w2.weight_scale", 32 * 64 / 32},
                                                    {"w3.weight_packed", 64 * 32 / 2}, {"w3.weight_scale", 64 * 32 / 32}};
  EXPECT_EQ(k3_expert_record_bytes(k.config), 3264u);
  for (auto [layer, expert] : {std::pair{1, 0}, std::pair{5, 7}, std::pair{9, 15}, std::pair{3, 1}}) {
    SCOPED_TRACE(::testing::Message() << "layer " << layer << " expert " << expert);
    std::string want;
    for (const auto& [suffix, bytes] : parts)
      want += pattern_bytes(
          cat("language_model.model.layers.", layer, ".block_sparse_moe.experts.", expert, ".", suffix), bytes);
    ASSERT_EQ(want.size(), 3264u);
    std::vector<uint8_t> got = k.read_expert_record(layer, expert);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), reinterpret_cast<const uint8_t*>(want.data())));
  }
  // Patterns differ between experts, so a mix-up would show.
  EXPECT_NE(k.read_expert_record(2, 0), k.read_expert_record(2, 1));
  EXPECT_NE(k.read_expert_record(2, 0), k.read_expert_record(4, 0));

  EXPECT_FAILS_WITH(k.read_expert_record(0, 0), dir.path(), "no routed expert", "layer 0");
  EXPECT_FAILS_WITH(k.read_expert_record(10, 0), dir.path(), "no routed expert", "layer 10");
  EXPECT_FAILS_WITH(k.read_expert_record(1, 16), dir.path(), "no routed expert", "expert 16");
  EXPECT_FAILS_WITH(k.read_expert_record(1, -1), dir.path(), "no routed expert", "expert -1");
}

TEST(K3Binder, SingleFileAndUnindexedShardsLoadToo) {
  const json config = tiny_config_json();
  {
    TempDir dir;
    write_checkpoint_dir(dir.path(), tiny_tensors(), 1, /*index*/ false, &config);
    ASSERT_TRUE(file_exists(dir.file("model.safetensors")));
    EXPECT_EQ(load_k3_checkpoint(dir.path()).ignored_tensors, 2u);
  }
  {
    TempDir dir;
    write_checkpoint_dir(dir.path(), tiny_tensors(), 3, /*index*/ false, &config);
    K3Checkpoint k = load_k3_checkpoint(dir.path());
    EXPECT_EQ(k.tensors.shards().size(), 3u);
  }
}

TEST(K3Binder, EveryProblemIsReportedAtOnce) {
  TempDir dir;
  const json config = tiny_config_json();
  std::vector<TensorSpec> t = tiny_tensors();
  const std::string missing1 = "language_model.model.layers.2.self_attn.A_log";
  const std::string missing2 = "language_model.model.layers.5.block_sparse_moe.experts.7.w2.weight_scale";
  const std::string unexpected = "language_model.model.layers.3.self_attn.rotary_emb.inv_freq";
  const std::string bad_shape = "language_model.model.layers.7.self_attn.q_b_proj.weight";
  const std::string bad_dtype = "language_model.model.layers.1.self_attn.dt_bias";
  erase_spec(t, missing1);
  erase_spec(t, missing2);
  t.push_back({unexpected, DType::F32, {4}});
  find_spec(t, bad_shape)->shape = {48, 16};
  find_spec(t, bad_dtype)->dtype = DType::BF16;
  write_checkpoint_dir(dir.path(), t, 2, /*index*/ true, &config);

  std::string msg = expect_error([&] { load_k3_checkpoint(dir.path()); },
                                 {dir.path(), "does not match the K3 architecture", "2 missing tensors", missing1,
                                  missing2, "1 unexpected tensors", unexpected,
                                  "2 tensors with the wrong dtype or shape",
                                  bad_shape + ": found BF16 [48, 16], expected BF16 [48, 32]",
                                  bad_dtype + ": found BF16 [64], expected F32 [64]"});
  EXPECT_EQ(msg.find("vision_tower"), std::string::npos) << "ignored tensors are not problems";

  // The same through the binder's report.
  Checkpoint ckpt = Checkpoint::open(dir.path());
  K3Config c = load_k3_config(dir.file("config.json"));
  BindReport r = bind_k3_tensors(ckpt, c, 32);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.missing, (std::vector<std::string>{missing1, missing2}));
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{unexpected}));
  ASSERT_EQ(r.wrong.size(), 2u);
  EXPECT_EQ(r.ignored, 2u);
  // describe() caps long lists.
  std::string capped = r.describe(1);
  EXPECT_NE(capped.find(missing1), std::string::npos);
  EXPECT_EQ(capped.find(missing2), std::string::npos);
  EXPECT_NE(capped.find("... and 1 more"), std::string::npos);
}

TEST(K3Binder, NonLanguageTensorOutsideVisionIsUnexpected) {
  TempDir dir;
  const json config = tiny_config_json();
  std::vector<TensorSpec> t = tiny_tensors();
  t.push_back({"model.embed_tokens.weight", DType::BF16, {768, 64}});  // missing the language_model. prefix
  write_checkpoint_dir(dir.path(), t, 2, /*index*/ false, &config);
  EXPECT_FAILS_WITH(load_k3_checkpoint(dir.path()), "1 unexpected tensors", "model.embed_tokens.weight");
}

TEST(K3Binder, GateRankComesFromTheCheckpoint) {
  // r_f is not in config.json: a checkpoint with r_f = 16 everywhere binds.
  TempDir dir;
  const json config = tiny_config_json();
  K3Config c = parse_k3_config(config, "tiny");
  std::vector<TensorSpec> t = k3_language_tensors(c, 16);
  write_checkpoint_dir(dir.path(), t, 2, /*index*/ true, &config);
  K3Checkpoint k = load_k3_checkpoint(dir.path());
  EXPECT_EQ(k.kda_gate_rank, 16);
  EXPECT_EQ(k.ignored_tensors, 0u);
  EXPECT_EQ(k.tensor("language_model.model.layers.8.self_attn.f_b_proj.weight").info->shape,
            (std::vector<uint64_t>{64, 16}));
}

TEST(K3Binder, BadConfigIsReportedBeforeTensors) {
  TempDir dir;
  json config = tiny_config_json();
  config["text_config"]["num_key_value_heads"] = 1;
  write_checkpoint_dir(dir.path(), tiny_tensors(), 1, /*index*/ false, &config);
  EXPECT_FAILS_WITH(load_k3_checkpoint(dir.path()), dir.file("config.json"), "num_key_value_heads");
  TempDir empty;
  EXPECT_FAILS_WITH(load_k3_checkpoint(empty.path()), empty.file("config.json"));
}
