// config.json -> K3Config (k3-model.md §2, §4.1, §14): the tiny and the real
// K3 configs parse with the right derived values, and every rule of §2.4 is
// enforced by refusing one mutation at a time with the field named.
#include "model/kimi_k3/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "support/k3_fixture.h"
#include "support/test_support.h"

using namespace deltafin;
using namespace deltafin::test;
using nlohmann::json;

namespace {

const std::string kWhere = "/ckpt/config.json";

K3Config parse(const json& j) { return parse_k3_config(j, kWhere); }

json with(json j, const std::string& pointer, const json& value) {
  j[json::json_pointer(pointer)] = value;
  return j;
}

json without(json j, const std::string& pointer) {
  json::json_pointer p(pointer);
  j[p.parent_pointer()].erase(p.back());
  return j;
}

// "/text_config/linear_attn_config/num_heads" -> "text_config.linear_attn_config.num_heads"
std::string dotted(const std::string& pointer) {
  std::string s = pointer.substr(1);
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

std::vector<size_t> mla_layers(const K3Config& c) {
  std::vector<size_t> out;
  for (size_t i = 0; i < c.layer_kinds.size(); ++i)
    if (c.layer_kinds[i] == LayerKind::MLA) out.push_back(i);
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST(K3Config, TinyParses) {
  K3Config c = parse(tiny_config_json());
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 10);
  EXPECT_EQ(c.attn_res_block_size, 4);
  EXPECT_EQ(c.vocab_size, 768);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.num_experts_per_token, 4);
  EXPECT_EQ(c.routed_expert_hidden_size, 32);
  EXPECT_EQ(c.moe_intermediate_size, 64);
  EXPECT_EQ(c.num_shared_experts, 2);
  EXPECT_EQ(c.kda_num_heads, 2);
  EXPECT_EQ(c.kda_head_dim, 32);
  EXPECT_EQ(c.kda_dim(), 64);
  EXPECT_EQ(c.short_conv_kernel_size, 4);
  EXPECT_EQ(c.gate_lower_bound, -5.0);
  EXPECT_EQ(c.num_attention_heads, 2);
  EXPECT_EQ(c.q_lora_rank, 32);
  EXPECT_EQ(c.kv_lora_rank, 32);
  EXPECT_EQ(c.qk_nope_head_dim, 16);
  EXPECT_EQ(c.qk_rope_head_dim, 8);
  EXPECT_EQ(c.v_head_dim, 16);
  EXPECT_EQ(c.mla_qk_head_dim(), 24);
  EXPECT_EQ(c.situ_beta, 4.0);
  EXPECT_EQ(c.situ_linear_beta, 25.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.bos_token_id, 512);
  EXPECT_EQ(c.eos_token_id, 514);
  EXPECT_EQ(c.pad_token_id, 767);
  EXPECT_EQ(c.reserved_base(), 512);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.full_attn_layers, (std::vector<int64_t>{4, 8, 10}));
  EXPECT_EQ(c.kda_layers, (std::vector<int64_t>{1, 2, 3, 5, 6, 7, 9}));
  ASSERT_EQ(c.layer_kinds.size(), 10u);
  EXPECT_EQ(mla_layers(c), (std::vector<size_t>{3, 7, 9}));
  EXPECT_EQ(c.layer_kinds[0], LayerKind::KDA);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(9));
  // Unused: vision_config and use_cache, nothing that is read.
  EXPECT_TRUE(contains(c.unused_fields, "vision_config"));
  EXPECT_TRUE(contains(c.unused_fields, "text_config.use_cache"));
  EXPECT_EQ(c.unused_fields.size(), 2u) << ::testing::PrintToString(c.unused_fields);
}

TEST(K3Config, RealK3Parses) {
  K3Config c = parse(k3_real_config_json());
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 93);
  EXPECT_EQ(c.attn_res_block_size, 12);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.intermediate_size, 33792);
  EXPECT_EQ(c.num_experts, 896);
  EXPECT_EQ(c.num_experts_per_token, 16);
  EXPECT_EQ(c.routed_expert_hidden_size, 3584);
  EXPECT_EQ(c.moe_intermediate_size, 3072);
  EXPECT_EQ(c.kda_dim(), 12288);
  EXPECT_EQ(c.mla_qk_head_dim(), 192);
  EXPECT_EQ(c.bos_token_id, 163584);
  EXPECT_EQ(c.eos_token_id, 163586);
  EXPECT_EQ(c.pad_token_id, 163839);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  ASSERT_EQ(c.layer_kinds.size(), 93u);
  std::vector<size_t> want;
  for (size_t i = 3; i <= 91; i += 4) want.push_back(i);
  want.push_back(92);
  EXPECT_EQ(mla_layers(c), want);
  EXPECT_EQ(want.size(), 24u);
  EXPECT_EQ(c.kda_layers.size(), 69u);
  EXPECT_EQ(c.layer_kinds[91], LayerKind::MLA);
  EXPECT_EQ(c.layer_kinds[92], LayerKind::MLA);
  EXPECT_EQ(c.layer_kinds[90], LayerKind::KDA);
  EXPECT_TRUE(contains(c.unused_fields, "vision_config"));
  EXPECT_TRUE(contains(c.unused_fields, "text_config.rope_theta"));
  EXPECT_TRUE(contains(c.unused_fields, "text_config.use_cache"));
  EXPECT_EQ(c.unused_fields.size(), 3u) << ::testing::PrintToString(c.unused_fields);
}

TEST(K3Config, QuantizationConfigOfTheCodeMatchesSpec) {
  // k3_quantization_config() must carry the §4.1 fields (the fixture spells them out).
  json q = k3_quantization_config();
  json spec = tiny_config_json()["text_config"]["quantization_config"];
  EXPECT_EQ(q["quant_method"], spec["quant_method"]);
  EXPECT_EQ(q["format"], spec["format"]);
  EXPECT_EQ(q["quantization_status"], spec["quantization_status"]);
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"], spec["config_groups"]["group_0"]["weights"]);
  // The code's block, used in the config, parses.
  EXPECT_NO_THROW(parse(with(tiny_config_json(), "/text_config/quantization_config", q)));
}

TEST(K3Config, LoadFromFileNamesThePath) {
  TempDir dir;
  const std::string path = dir.file("config.json");
  write_bytes(path, tiny_config_json().dump(2));
  K3Config c = load_k3_config(path);
  EXPECT_EQ(c.hidden_size, 64);
  write_bytes(path, with(tiny_config_json(), "/text_config/hidden_size", "64").dump());
  EXPECT_FAILS_WITH(load_k3_config(path), path, "text_config.hidden_size", "must be an integer");
  write_bytes(path, "{\"model_type\": ");
  EXPECT_FAILS_WITH(load_k3_config(path), path, "not valid JSON");
  EXPECT_FAILS_WITH(load_k3_config(dir.file("absent.json")), dir.file("absent.json"));
}

TEST(K3Config, EveryFixedFieldIsEnforced) {
  struct Fixed {
    const char* pointer;
    json bad;
  };
  const Fixed fixed[] = {
      {"/model_type", "kimi_linear"},
      {"/dtype", "float16"},
      {"/tie_word_embeddings", true},
      {"/text_config/model_type", "deepseek_v3"},
      {"/text_config/dtype", "float32"},
      {"/text_config/mla_use_nope", false},
      {"/text_config/mla_use_output_gate", false},
      {"/text_config/first_k_dense_replace", 2},
      {"/text_config/first_k_dense_replace", 0},
      {"/text_config/moe_layer_freq", 2},
      {"/text_config/num_expert_group", 8},
      {"/text_config/topk_group", 4},
      {"/text_config/use_grouped_topk", false},
      {"/text_config/topk_method", "greedy"},
      {"/text_config/moe_router_activation_func", "softmax"},
      {"/text_config/moe_renormalize", false},
      {"/text_config/routed_scaling_factor", 2.5},
      {"/text_config/latent_moe_use_norm", false},
      {"/text_config/hidden_act", "silu"},
      {"/text_config/num_nextn_predict_layers", 1},
      {"/text_config/tie_word_embeddings", true},
      {"/text_config/linear_attn_config/use_full_rank_gate", false},
      // A bool is not the number 1, a string not the bool.
      {"/text_config/moe_layer_freq", true},
      {"/text_config/mla_use_nope", "true"},
      {"/text_config/quantization_config/quant_method", "gptq"},
      {"/text_config/quantization_config/format", "nvfp4-pack-quantized"},
      {"/text_config/quantization_config/quantization_status", "frozen"},
      {"/text_config/quantization_config/config_groups/group_0/weights/num_bits", 8},
      {"/text_config/quantization_config/config_groups/group_0/weights/group_size", 16},
      {"/text_config/quantization_config/config_groups/group_0/weights/type", "int"},
      {"/text_config/quantization_config/config_groups/group_0/weights/strategy", "channel"},
      {"/text_config/quantization_config/config_groups/group_0/weights/symmetric", false},
      {"/text_config/quantization_config/config_groups/group_0/weights/dynamic", true},
      {"/text_config/quantization_config/config_groups/group_0/weights/observer", "mse"},
      {"/text_config/quantization_config/config_groups/group_0/weights/scale_dtype", "torch.float8_e4m3fn"},
  };
  for (const Fixed& f : fixed) {
    SCOPED_TRACE(f.pointer);
    const std::string field = dotted(f.pointer);
    EXPECT_FAILS_WITH(parse(with(tiny_config_json(), f.pointer, f.bad)), kWhere, ": field " + field + " = ",
                      f.bad.dump(), "only supports");
    EXPECT_FAILS_WITH(parse(without(tiny_config_json(), f.pointer)), kWhere, "field " + field + " is missing");
  }
  // Numerically equal spellings of a fixed number are the same value.
  EXPECT_NO_THROW(parse(with(tiny_config_json(), "/text_config/routed_scaling_factor", 1)));
  EXPECT_NO_THROW(parse(with(tiny_config_json(), "/text_config/num_nextn_predict_layers", 0.0)));
}

TEST(K3Config, EveryReadFieldMustBePresent) {
  const char* read[] = {"/text_config",
                        "/bos_token_id",
                        "/eos_token_id",
                        "/pad_token_id",
                        "/text_config/hidden_size",
                        "/text_config/num_hidden_layers",
                        "/text_config/attn_res_block_size",
                        "/text_config/vocab_size",
                        "/text_config/intermediate_size",
                        "/text_config/num_experts",
                        "/text_config/num_experts_per_token",
                        "/text_config/routed_expert_hidden_size",
                        "/text_config/moe_intermediate_size",
                        "/text_config/num_shared_experts",
                        "/text_config/num_attention_heads",
                        "/text_config/num_key_value_heads",
                        "/text_config/q_lora_rank",
                        "/text_config/kv_lora_rank",
                        "/text_config/qk_nope_head_dim",
                        "/text_config/qk_rope_head_dim",
                        "/text_config/v_head_dim",
                        "/text_config/activation_situ_beta",
                        "/text_config/activation_situ_linear_beta",
                        "/text_config/rms_norm_eps",
                        "/text_config/bos_token_id",
                        "/text_config/eos_token_id",
                        "/text_config/pad_token_id",
                        "/text_config/max_position_embeddings",
                        "/text_config/linear_attn_config",
                        "/text_config/linear_attn_config/num_heads",
                        "/text_config/linear_attn_config/head_dim",
                        "/text_config/linear_attn_config/short_conv_kernel_size",
                        "/text_config/linear_attn_config/gate_lower_bound",
                        "/text_config/linear_attn_config/full_attn_layers",
                        "/text_config/linear_attn_config/kda_layers"};
  for (const char* p : read) {
    SCOPED_TRACE(p);
    EXPECT_FAILS_WITH(parse(without(tiny_config_json(), p)), kWhere, "field " + dotted(p) + " is missing");
  }
  // Unused fields may be absent.
  EXPECT_NO_THROW(parse(without(tiny_config_json(), "/vision_config")));
  EXPECT_NO_THROW(parse(without(tiny_config_json(), "/text_config/use_cache")));
}

TEST(K3Config, WrongTypes) {
  const json base = tiny_config_json();
  EXPECT_FAILS_WITH(parse(json::array()), kWhere, "root is not a JSON object");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config", json::array())), kWhere, "text_config is not a JSON object");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/linear_attn_config", 3)), kWhere,
                    "text_config.linear_attn_config is not a JSON object");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/hidden_size", "64")), kWhere, "field text_config.hidden_size",
                    "must be an integer", "\"64\"");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/hidden_size", 64.5)), kWhere, "field text_config.hidden_size",
                    "must be an integer", "64.5");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/num_experts", true)), kWhere, "field text_config.num_experts",
                    "must be an integer");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/rms_norm_eps", "1e-5")), kWhere,
                    "field text_config.rms_norm_eps", "must be a number");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/linear_attn_config/full_attn_layers", "4,8,10")), kWhere,
                    "field text_config.linear_attn_config.full_attn_layers", "must be an array of integers");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/linear_attn_config/kda_layers/1", 2.0)), kWhere,
                    "field text_config.linear_attn_config.kda_layers", "non-integer entry 2.0");
  EXPECT_FAILS_WITH(parse(with(base, "/bos_token_id", "512")), kWhere, "field bos_token_id", "must be an integer");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/quantization_config", "mxfp4")), kWhere,
                    "text_config.quantization_config is not a JSON object");
  // Dimensions must be positive.
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/hidden_size", 0)), kWhere, "field text_config.hidden_size = 0",
                    "expected >= 1");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/attn_res_block_size", 0)), kWhere,
                    "field text_config.attn_res_block_size = 0", "expected >= 1");
  EXPECT_FAILS_WITH(parse(with(base, "/text_config/qk_rope_head_dim", -1)), kWhere,
                    "field text_config.qk_rope_head_dim = -1", "expected >= 0");
}

// A dimension or count is at most kMaxConfigSize (2^20): before,
// num_hidden_layers = 10^11 sized an 800 GB table of layer owners (a
// bad_alloc, not a named error) and heads x head_dim could overflow
// kda_dim() (found with fuzz_config's harness).
TEST(K3Config, DimensionsAreBounded) {
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/num_hidden_layers", int64_t{100000000000})), kWhere,
                    "field text_config.num_hidden_layers = 100000000000, expected <= 1048576");
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/linear_attn_config/head_dim", int64_t{1} << 40)),
                    kWhere, "field text_config.linear_attn_config.head_dim = 1099511627776, expected <= 1048576");
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/hidden_size", UINT64_MAX)), kWhere,
                    "field text_config.hidden_size = 18446744073709551615, expected <= 1048576");
  // The vocabulary is bounded by 32-bit token ids, the context not at all.
  K3Config c = parse(with(tiny_config_json(), "/text_config/max_position_embeddings", int64_t{1} << 40));
  EXPECT_EQ(c.max_position_embeddings, int64_t{1} << 40);
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/vocab_size", (int64_t{1} << 32) + 1)), kWhere,
                    "field text_config.vocab_size = 4294967297, expected <= 4294967296");
}

TEST(K3Config, LayerListsOverlap) {
  json j = with(tiny_config_json(), "/text_config/linear_attn_config/kda_layers", {1, 2, 3, 4, 5, 6, 7, 9});
  EXPECT_FAILS_WITH(parse(j), kWhere, "layer 4 (1-based)", "full_attn_layers", "kda_layers", "both");
}

TEST(K3Config, LayerListsDoNotCover) {
  json j = with(tiny_config_json(), "/text_config/linear_attn_config/kda_layers", {1, 2, 3, 6, 7, 9});
  EXPECT_FAILS_WITH(parse(j), kWhere, "layer 5 (1-based)", "neither full_attn_layers nor kda_layers",
                    "cover 1..10");
  j = with(tiny_config_json(), "/text_config/linear_attn_config/full_attn_layers", {4, 8});
  EXPECT_FAILS_WITH(parse(j), kWhere, "layer 10 (1-based)", "neither");
}

TEST(K3Config, LayerListsOutOfRange) {
  // 0-based thinking: layer 0 does not exist in the 1-based lists.
  json j = with(tiny_config_json(), "/text_config/linear_attn_config/kda_layers", {0, 1, 2, 3, 5, 6, 7, 9});
  EXPECT_FAILS_WITH(parse(j), kWhere, "text_config.linear_attn_config.kda_layers", "layer 0", "outside 1..10",
                    "1-based");
  j = with(tiny_config_json(), "/text_config/linear_attn_config/full_attn_layers", {4, 8, 10, 11});
  EXPECT_FAILS_WITH(parse(j), kWhere, "text_config.linear_attn_config.full_attn_layers", "layer 11",
                    "outside 1..10");
  j = with(tiny_config_json(), "/text_config/linear_attn_config/full_attn_layers", {-4, 8, 10});
  EXPECT_FAILS_WITH(parse(j), kWhere, "full_attn_layers", "layer -4", "outside 1..10");
}

TEST(K3Config, LayerListsUnsorted) {
  json j = with(tiny_config_json(), "/text_config/linear_attn_config/full_attn_layers", {8, 4, 10});
  EXPECT_FAILS_WITH(parse(j), kWhere, "text_config.linear_attn_config.full_attn_layers", "not sorted ascending");
  j = with(tiny_config_json(), "/text_config/linear_attn_config/kda_layers", {1, 2, 3, 5, 5, 6, 7, 9});
  EXPECT_FAILS_WITH(parse(j), kWhere, "text_config.linear_attn_config.kda_layers", "not sorted ascending at 5");
}

TEST(K3Config, TopKAtMostExperts) {
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/num_experts_per_token", 17)), kWhere,
                    "field text_config.num_experts_per_token = 17", "expected <= num_experts = 16");
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/num_experts_per_token", 0)), kWhere,
                    "field text_config.num_experts_per_token = 0", "expected >= 1");
  K3Config c = parse(with(tiny_config_json(), "/text_config/num_experts_per_token", 16));  // k = E is fine
  EXPECT_EQ(c.num_experts_per_token, 16);
}

TEST(K3Config, LatentAndMoeWidthsMultipleOf32) {
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/routed_expert_hidden_size", 48)), kWhere,
                    "field text_config.routed_expert_hidden_size = 48", "multiple of 32");
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/moe_intermediate_size", 80)), kWhere,
                    "field text_config.moe_intermediate_size = 80", "multiple of 32");
  EXPECT_NO_THROW(parse(with(tiny_config_json(), "/text_config/moe_intermediate_size", 96)));
}

TEST(K3Config, KvHeadsEqualHeads) {
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/num_key_value_heads", 1)), kWhere,
                    "field text_config.num_key_value_heads = 1", "num_attention_heads = 2");
}

TEST(K3Config, SpecialIdsAtReservedPositions) {
  auto both = [](const char* key, int64_t v) {
    json j = tiny_config_json();
    j[key] = v;
    j["text_config"][key] = v;
    return j;
  };
  EXPECT_FAILS_WITH(parse(both("bos_token_id", 513)), kWhere, "field text_config.bos_token_id = 513",
                    "1st reserved id 512");
  EXPECT_FAILS_WITH(parse(both("eos_token_id", 513)), kWhere, "field text_config.eos_token_id = 513",
                    "3rd reserved id 514");
  EXPECT_FAILS_WITH(parse(both("pad_token_id", 766)), kWhere, "field text_config.pad_token_id = 766",
                    "last reserved id 767");
  // The reserved block moves with the vocabulary.
  json j = with(both("bos_token_id", 768), "/text_config/vocab_size", 1024);
  j = with(j, "/eos_token_id", 770);
  j = with(j, "/text_config/eos_token_id", 770);
  j = with(j, "/pad_token_id", 1023);
  j = with(j, "/text_config/pad_token_id", 1023);
  EXPECT_EQ(parse(j).reserved_base(), 768);
}

TEST(K3Config, RootAndTextIdsMustAgree) {
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    SCOPED_TRACE(key);
    json j = tiny_config_json();
    j[key] = j[key].get<int64_t>() - 1;
    EXPECT_FAILS_WITH(parse(j), kWhere, std::string("field ") + key + " = ", std::string("text_config.") + key,
                      "must agree");
  }
}

TEST(K3Config, QuantizationConfigPlacement) {
  const json base = tiny_config_json();
  const json q = base["text_config"]["quantization_config"];
  // Missing from both places.
  EXPECT_FAILS_WITH(parse(without(base, "/text_config/quantization_config")), kWhere,
                    "quantization_config is missing");
  // At the root only: accepted.
  json root_only = with(without(base, "/text_config/quantization_config"), "/quantization_config", q);
  EXPECT_NO_THROW(parse(root_only));
  // At the root only, checked just the same.
  EXPECT_FAILS_WITH(parse(with(root_only, "/quantization_config/config_groups/group_0/weights/group_size", 16)),
                    kWhere, "field quantization_config.config_groups.group_0.weights.group_size = 16");
  EXPECT_FAILS_WITH(parse(without(root_only, "/quantization_config/config_groups/group_0")), kWhere,
                    "field quantization_config.config_groups.group_0 is missing");
  // Both, identical: accepted and not reported as unused.
  K3Config c = parse(with(base, "/quantization_config", q));
  EXPECT_FALSE(contains(c.unused_fields, "quantization_config"));
  // Both, different (in a key the check itself does not enumerate): refused.
  json other = q;
  other["ignore"] = {"lm_head"};
  EXPECT_FAILS_WITH(parse(with(base, "/quantization_config", other)), kWhere, "quantization_config",
                    "text_config.quantization_config", "differ");
  // Both, the root one wrong in a checked field: refused naming the root field.
  EXPECT_FAILS_WITH(parse(with(base, "/quantization_config", with(q, "/config_groups/group_0/weights/scale_dtype",
                                                                  "torch.float32"))),
                    kWhere, "field quantization_config.config_groups.group_0.weights.scale_dtype");
}

TEST(K3Config, GateLowerBoundNegative) {
  for (double v : {0.0, 0.5}) {
    SCOPED_TRACE(v);
    EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/linear_attn_config/gate_lower_bound", v)), kWhere,
                      "field text_config.linear_attn_config.gate_lower_bound", "expected a negative number");
  }
  EXPECT_EQ(parse(with(tiny_config_json(), "/text_config/linear_attn_config/gate_lower_bound", -3)).gate_lower_bound,
            -3.0);
}

TEST(K3Config, ScalarParametersPositive) {
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/rms_norm_eps", 0.0)), kWhere,
                    "field text_config.rms_norm_eps", "expected > 0");
  EXPECT_FAILS_WITH(parse(with(tiny_config_json(), "/text_config/activation_situ_beta", -4.0)), kWhere,
                    "activation_situ_beta", "must be > 0");
}

TEST(K3Config, UnusedFieldsAreListedNotRefused) {
  json j = tiny_config_json();
  j["text_config"]["rope_theta"] = 10000.0;
  j["text_config"]["rope_scaling"] = {{"type", "yarn"}, {"factor", 32.0}};
  j["text_config"]["linear_attn_config"]["chunk_size"] = 64;
  j["architectures"] = {"KimiK3ForConditionalGeneration"};
  K3Config c = parse(j);
  for (const char* f : {"vision_config", "architectures", "text_config.use_cache", "text_config.rope_theta",
                        "text_config.rope_scaling", "text_config.linear_attn_config.chunk_size"})
    EXPECT_TRUE(contains(c.unused_fields, f)) << f << " in " << ::testing::PrintToString(c.unused_fields);
  EXPECT_EQ(c.unused_fields.size(), 6u);
}
