#include "model/kimi_k3/tensors.h"

#include "util/error.h"

namespace deltafin {

namespace {
using Shape = std::vector<uint64_t>;
uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }
}  // namespace

std::string k3_layer_tensor(int64_t layer, const std::string& suffix) {
  return cat("language_model.model.layers.", layer, ".", suffix);
}

std::string k3_expert_tensor(int64_t layer, int64_t expert, const char* matrix, bool scale) {
  return k3_layer_tensor(layer, cat("block_sparse_moe.experts.", expert, ".", matrix, scale ? ".weight_scale" : ".weight_packed"));
}

std::vector<TensorSpec> k3_expert_tensors(const K3Config& c, int64_t layer, int64_t e) {
  const uint64_t lat = u(c.routed_expert_hidden_size), mid = u(c.moe_intermediate_size);
  return {
      {k3_expert_tensor(layer, e, "w1", false), DType::U8, Shape{mid, lat / 2}},
      {k3_expert_tensor(layer, e, "w1", true), DType::U8, Shape{mid, lat / 32}},
      {k3_expert_tensor(layer, e, "w2", false), DType::U8, Shape{lat, mid / 2}},
      {k3_expert_tensor(layer, e, "w2", true), DType::U8, Shape{lat, mid / 32}},
      {k3_expert_tensor(layer, e, "w3", false), DType::U8, Shape{mid, lat / 2}},
      {k3_expert_tensor(layer, e, "w3", true), DType::U8, Shape{mid, lat / 32}},
  };
}

uint64_t k3_expert_record_bytes(const K3Config& c) {
  uint64_t n = 0;
  for (const TensorSpec& t : k3_expert_tensors(c, 1, 0)) n += t.bytes();
  return n;
}

std::vector<TensorSpec> k3_language_tensors(const K3Config& c, int64_t rf) {
  const uint64_t d = u(c.hidden_size), V = u(c.vocab_size);
  std::vector<TensorSpec> out;
  auto add = [&](std::string name, DType t, Shape s) { out.push_back({std::move(name), t, std::move(s)}); };

  add("language_model.model.embed_tokens.weight", DType::BF16, {V, d});
  add("language_model.model.norm.weight", DType::BF16, {d});
  add("language_model.model.output_attn_res_norm.weight", DType::BF16, {d});
  add("language_model.model.output_attn_res_proj.weight", DType::BF16, {1, d});
  add("language_model.lm_head.weight", DType::BF16, {V, d});

  const uint64_t Dk = u(c.kda_dim()), K = u(c.kda_head_dim), Hk = u(c.kda_num_heads);
  const uint64_t Hm = u(c.num_attention_heads), qk = u(c.mla_qk_head_dim()), dv = u(c.v_head_dim);
  const uint64_t rq = u(c.q_lora_rank), rkv = u(c.kv_lora_rank), drope = u(c.qk_rope_head_dim);
  const uint64_t lat = u(c.routed_expert_hidden_size), shared = u(c.num_shared_experts * c.moe_intermediate_size);

  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    auto L = [&](const std::string& s) { return k3_layer_tensor(i, s); };
    for (const char* n : {"input_layernorm", "self_attention_res_norm", "post_attention_layernorm", "mlp_res_norm"})
      add(L(cat(n, ".weight")), DType::BF16, {d});
    add(L("self_attention_res_proj.weight"), DType::BF16, {1, d});
    add(L("mlp_res_proj.weight"), DType::BF16, {1, d});

    if (c.layer_kinds[static_cast<size_t>(i)] == LayerKind::KDA) {
      add(L("self_attn.A_log"), DType::F32, {K});
      add(L("self_attn.dt_bias"), DType::F32, {Dk});
      for (const char* n : {"q_conv1d", "k_conv1d", "v_conv1d"})
        add(L(cat("self_attn.", n, ".weight")), DType::F32, {Dk, 1, u(c.short_conv_kernel_size)});
      add(L("self_attn.o_norm.weight"), DType::F32, {K});
      for (const char* n : {"q_proj", "k_proj", "v_proj", "g_proj"}) add(L(cat("self_attn.", n, ".weight")), DType::BF16, {Dk, d});
      add(L("self_attn.f_a_proj.weight"), DType::BF16, {u(rf), d});
      add(L("self_attn.f_b_proj.weight"), DType::BF16, {Dk, u(rf)});
      add(L("self_attn.b_proj.weight"), DType::BF16, {Hk, d});
      add(L("self_attn.o_proj.weight"), DType::BF16, {d, Dk});
    } else {
      add(L("self_attn.q_a_proj.weight"), DType::BF16, {rq, d});
      add(L("self_attn.q_a_layernorm.weight"), DType::BF16, {rq});
      add(L("self_attn.q_b_proj.weight"), DType::BF16, {Hm * qk, rq});
      add(L("self_attn.kv_a_proj_with_mqa.weight"), DType::BF16, {rkv + drope, d});
      add(L("self_attn.kv_a_layernorm.weight"), DType::BF16, {rkv});
      add(L("self_attn.kv_b_proj.weight"), DType::BF16, {Hm * (u(c.qk_nope_head_dim) + dv), rkv});
      add(L("self_attn.g_proj.weight"), DType::BF16, {Hm * dv, d});
      add(L("self_attn.o_proj.weight"), DType::BF16, {d, Hm * dv});
    }

    if (!c.is_moe_layer(i)) {
      add(L("mlp.gate_proj.weight"), DType::BF16, {u(c.intermediate_size), d});
      add(L("mlp.up_proj.weight"), DType::BF16, {u(c.intermediate_size), d});
      add(L("mlp.down_proj.weight"), DType::BF16, {d, u(c.intermediate_size)});
      continue;
    }
    add(L("block_sparse_moe.gate.weight"), DType::BF16, {u(c.num_experts), d});
    add(L("block_sparse_moe.gate.e_score_correction_bias"), DType::F32, {u(c.num_experts)});
    add(L("block_sparse_moe.routed_expert_down_proj.weight"), DType::BF16, {lat, d});
    add(L("block_sparse_moe.routed_expert_norm.weight"), DType::BF16, {lat});
    add(L("block_sparse_moe.routed_expert_up_proj.weight"), DType::BF16, {d, lat});
    add(L("block_sparse_moe.shared_experts.gate_proj.weight"), DType::BF16, {shared, d});
    add(L("block_sparse_moe.shared_experts.up_proj.weight"), DType::BF16, {shared, d});
    add(L("block_sparse_moe.shared_experts.down_proj.weight"), DType::BF16, {d, shared});
    for (int64_t e = 0; e < c.num_experts; ++e)
      for (TensorSpec& t : k3_expert_tensors(c, i, e)) out.push_back(std::move(t));
  }
  return out;
}

}  // namespace deltafin
