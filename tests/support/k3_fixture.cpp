#include "support/k3_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "format/checkpoint.h"
#include "support/test_support.h"
#include "util/error.h"

namespace deltafin::test {

using nlohmann::json;

namespace {

// Every field of k3-model.md §2.2 that is the same for every checkpoint of the
// architecture, written out here rather than taken from the code under test.
json fixed_text_fields() {
  return json{{"model_type", "kimi_linear"},
              {"dtype", "bfloat16"},
              {"mla_use_nope", true},
              {"mla_use_output_gate", true},
              {"first_k_dense_replace", 1},
              {"moe_layer_freq", 1},
              {"num_expert_group", 1},
              {"topk_group", 1},
              {"use_grouped_topk", true},
              {"topk_method", "noaux_tc"},
              {"moe_router_activation_func", "sigmoid"},
              {"moe_renormalize", true},
              {"routed_scaling_factor", 1.0},
              {"latent_moe_use_norm", true},
              {"hidden_act", "situ"},
              {"num_nextn_predict_layers", 0},
              {"tie_word_embeddings", false}};
}

// §4.1, spelled out independently of k3_quantization_config().
json quantization_block() {
  return json{{"quant_method", "compressed-tensors"},
              {"format", "mxfp4-pack-quantized"},
              {"quantization_status", "compressed"},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}},
                  {"weights",
                   {{"num_bits", 4},
                    {"group_size", 32},
                    {"type", "float"},
                    {"strategy", "group"},
                    {"symmetric", true},
                    {"dynamic", false},
                    {"observer", "minmax"},
                    {"scale_dtype", "torch.uint8"}}}}}}}};
}

json make_config(int64_t d, int64_t L, int64_t B, int64_t V, int64_t I_dense, int64_t E, int64_t k, int64_t d_lat,
                 int64_t I_moe, int64_t S, int64_t H_kda, int64_t K, int64_t H_mla, int64_t r_q, int64_t r_kv,
                 int64_t nope, int64_t rope, int64_t dv, int64_t max_pos, const std::vector<int64_t>& full) {
  std::vector<int64_t> kda;
  for (int64_t l = 1; l <= L; ++l)
    if (std::find(full.begin(), full.end(), l) == full.end()) kda.push_back(l);
  json t = fixed_text_fields();
  t["hidden_size"] = d;
  t["num_hidden_layers"] = L;
  t["attn_res_block_size"] = B;
  t["vocab_size"] = V;
  t["intermediate_size"] = I_dense;
  t["num_experts"] = E;
  t["num_experts_per_token"] = k;
  t["routed_expert_hidden_size"] = d_lat;
  t["moe_intermediate_size"] = I_moe;
  t["num_shared_experts"] = S;
  t["linear_attn_config"] = json{{"num_heads", H_kda},
                                 {"head_dim", K},
                                 {"short_conv_kernel_size", 4},
                                 {"gate_lower_bound", -5.0},
                                 {"full_attn_layers", full},
                                 {"kda_layers", kda},
                                 {"use_full_rank_gate", true}};
  t["num_attention_heads"] = H_mla;
  t["num_key_value_heads"] = H_mla;
  t["q_lora_rank"] = r_q;
  t["kv_lora_rank"] = r_kv;
  t["qk_nope_head_dim"] = nope;
  t["qk_rope_head_dim"] = rope;
  t["v_head_dim"] = dv;
  t["activation_situ_beta"] = 4.0;
  t["activation_situ_linear_beta"] = 25.0;
  t["rms_norm_eps"] = 1e-5;
  t["bos_token_id"] = V - 256;
  t["eos_token_id"] = V - 254;
  t["pad_token_id"] = V - 1;
  t["max_position_embeddings"] = max_pos;
  t["use_cache"] = true;
  t["quantization_config"] = quantization_block();

  json root;
  root["model_type"] = "kimi_k3";
  root["dtype"] = "bfloat16";
  root["tie_word_embeddings"] = false;
  root["bos_token_id"] = V - 256;
  root["eos_token_id"] = V - 254;
  root["pad_token_id"] = V - 1;
  root["text_config"] = t;
  root["vision_config"] = json{{"model_type", "moonvit"}, {"hidden_size", 1152}, {"patch_size", 14}};
  return root;
}

}  // namespace

json tiny_config_json() {
  return make_config(/*d*/ 64, /*L*/ 10, /*B*/ 4, /*V*/ 768, /*I_dense*/ 128, /*E*/ 16, /*k*/ 4, /*d_lat*/ 32,
                     /*I_moe*/ 64, /*S*/ 2, /*H_kda*/ 2, /*K*/ 32, /*H_mla*/ 2, /*r_q*/ 32, /*r_kv*/ 32,
                     /*nope*/ 16, /*rope*/ 8, /*dv*/ 16, /*max_pos*/ 4096, {4, 8, 10});
}

json k3_real_config_json() {
  std::vector<int64_t> full;
  for (int64_t l = 4; l <= 92; l += 4) full.push_back(l);
  full.push_back(93);
  json c = make_config(7168, 93, 12, 163840, 33792, 896, 16, 3584, 3072, 2, 96, 128, 96, 1536, 512, 128, 64, 128,
                       1048576, full);
  c["text_config"]["rope_theta"] = 50000.0;
  return c;
}

std::string raw_safetensors(const std::string& header, const std::string& payload) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + payload;
}

uint8_t pattern_byte(const std::string& name, uint64_t i) {
  uint32_t h = 2166136261u;  // FNV-1a of the name
  for (unsigned char ch : name) h = (h ^ ch) * 16777619u;
  return static_cast<uint8_t>((h ^ (h >> 8) ^ (h >> 16) ^ (h >> 24)) + i * 7);
}

std::string pattern_bytes(const std::string& name, uint64_t n) {
  std::string s(n, '\0');
  for (uint64_t i = 0; i < n; ++i) s[i] = static_cast<char>(pattern_byte(name, i));
  return s;
}

void write_patterned_safetensors(const std::string& path, const std::vector<TensorSpec>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter w(path, tensors, metadata);
  for (const TensorSpec& t : tensors) {
    std::string bytes = pattern_bytes(t.name, t.bytes());
    w.append(bytes.data(), bytes.size());
  }
  w.commit();
}

void write_checkpoint_dir(const std::string& dir, const std::vector<TensorSpec>& tensors, int shards, bool with_index,
                          const json* config) {
  std::filesystem::create_directories(dir);
  json weight_map = json::object();
  uint64_t total = 0;
  const size_t per = (tensors.size() + shards - 1) / shards;
  for (int s = 0; s < shards; ++s) {
    size_t b = std::min(tensors.size(), s * per), e = std::min(tensors.size(), (s + 1) * per);
    std::vector<TensorSpec> part(tensors.begin() + b, tensors.begin() + e);
    std::string name = shards == 1 && !with_index ? "model.safetensors" : shard_file_name(s + 1, shards);
    for (const TensorSpec& t : part) {
      weight_map[t.name] = name;
      total += t.bytes();
    }
    write_patterned_safetensors(dir + "/" + name, part, {{"format", "pt"}});
  }
  if (with_index)
    write_bytes(dir + "/model.safetensors.index.json",
                json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2));
  if (config) write_bytes(dir + "/config.json", config->dump(2));
}

}  // namespace deltafin::test
