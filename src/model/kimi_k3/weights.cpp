#include "model/kimi_k3/weights.h"

#include <cmath>

#include <cstring>

#include "model/kimi_k3/tensors.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {


namespace {

// Counts resident bytes as tensors arrive.
class Loader {
public:
  explicit Loader(SpineTensorSource& s) : s_(s) {}

  Matrix matrix(const std::string& name) {
    Matrix m = s_.matrix(name);
    bytes += m.storage.size() + m.scales.size();
    return m;
  }

  std::vector<float> vec(const std::string& name) {
    std::vector<float> v = s_.vec(name);
    bytes += v.size() * sizeof(float);
    return v;
  }

  // s = w_norm ⊙ w_proj in fp32: a product of two BF16 values is exact.
  std::vector<float> pseudo_query(const std::string& norm, const std::string& proj) {
    std::vector<float> s = vec(norm), p = vec(proj);
    for (size_t i = 0; i < s.size(); ++i) s[i] *= p[i];
    return s;
  }

  uint64_t bytes = 0;

private:
  SpineTensorSource& s_;
};

}  // namespace

MlaDims k3_mla_dims(const K3Config& c) {
  MlaDims d;
  d.heads = static_cast<size_t>(c.num_attention_heads);
  d.nope = static_cast<size_t>(c.qk_nope_head_dim);
  d.rope = static_cast<size_t>(c.qk_rope_head_dim);
  d.dv = static_cast<size_t>(c.v_head_dim);
  d.rank = static_cast<size_t>(c.kv_lora_rank);
  d.eps = static_cast<float>(c.rms_norm_eps);
  d.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.nope + d.rope)));  // (float)(192^-0.5) for K3
  return d;
}

uint64_t k3_derived_weight_bytes(const K3Config& c, bool int8_row_spine) {
  uint64_t mla_layers = 0;
  for (LayerKind k : c.layer_kinds) mla_layers += k == LayerKind::MLA;
  return mla_layers * mla_derived_bytes(k3_mla_dims(c), int8_row_spine ? WeightType::Int8Row : WeightType::BF16);
}

K3Weights load_k3_weights(const K3Checkpoint& k) {
  CheckpointSpineSource source(k.tensors);
  return load_k3_weights(k.config, source);
}

K3Weights load_k3_weights(const K3Config& c, SpineTensorSource& source) {
  Loader ld(source);
  K3Weights w;
  w.embed = ld.matrix("language_model.model.embed_tokens.weight");
  w.lm_head = ld.matrix("language_model.lm_head.weight");
  w.final_norm = ld.vec("language_model.model.norm.weight");
  w.s_out = ld.pseudo_query("language_model.model.output_attn_res_norm.weight",
                            "language_model.model.output_attn_res_proj.weight");
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    auto n = [&](const std::string& s) { return k3_layer_tensor(i, s); };
    l.kind = c.layer_kinds[static_cast<size_t>(i)];
    l.input_norm = ld.vec(n("input_layernorm.weight"));
    l.post_attention_norm = ld.vec(n("post_attention_layernorm.weight"));
    l.s_attn = ld.pseudo_query(n("self_attention_res_norm.weight"), n("self_attention_res_proj.weight"));
    l.s_mlp = ld.pseudo_query(n("mlp_res_norm.weight"), n("mlp_res_proj.weight"));
    if (l.kind == LayerKind::KDA) {
      KdaWeights& a = l.kda;
      a.q = ld.matrix(n("self_attn.q_proj.weight"));
      a.k = ld.matrix(n("self_attn.k_proj.weight"));
      a.v = ld.matrix(n("self_attn.v_proj.weight"));
      a.g = ld.matrix(n("self_attn.g_proj.weight"));
      a.f_a = ld.matrix(n("self_attn.f_a_proj.weight"));
      a.f_b = ld.matrix(n("self_attn.f_b_proj.weight"));
      a.b = ld.matrix(n("self_attn.b_proj.weight"));
      a.o = ld.matrix(n("self_attn.o_proj.weight"));
      a.a_log = ld.vec(n("self_attn.A_log"));
      a.dt_bias = ld.vec(n("self_attn.dt_bias"));
      a.q_conv = ld.vec(n("self_attn.q_conv1d.weight"));
      a.k_conv = ld.vec(n("self_attn.k_conv1d.weight"));
      a.v_conv = ld.vec(n("self_attn.v_conv1d.weight"));
      a.o_norm = ld.vec(n("self_attn.o_norm.weight"));
    } else {
      MlaWeights& a = l.mla;
      a.q_a = ld.matrix(n("self_attn.q_a_proj.weight"));
      a.q_b = ld.matrix(n("self_attn.q_b_proj.weight"));
      a.kv_a = ld.matrix(n("self_attn.kv_a_proj_with_mqa.weight"));
      a.kv_b = ld.matrix(n("self_attn.kv_b_proj.weight"));
      a.g = ld.matrix(n("self_attn.g_proj.weight"));
      a.o = ld.matrix(n("self_attn.o_proj.weight"));
      a.q_a_norm = ld.vec(n("self_attn.q_a_layernorm.weight"));
      a.kv_a_norm = ld.vec(n("self_attn.kv_a_layernorm.weight"));
      w.derived_bytes += mla_derive(a, k3_mla_dims(c));
    }
    if (!c.is_moe_layer(i)) {
      l.dense.gate = ld.matrix(n("mlp.gate_proj.weight"));
      l.dense.up = ld.matrix(n("mlp.up_proj.weight"));
      l.dense.down = ld.matrix(n("mlp.down_proj.weight"));
    } else {
      MoeWeights& m = l.moe;
      m.router = ld.matrix(n("block_sparse_moe.gate.weight"));
      m.correction_bias = ld.vec(n("block_sparse_moe.gate.e_score_correction_bias"));
      m.latent_down = ld.matrix(n("block_sparse_moe.routed_expert_down_proj.weight"));
      m.latent_norm = ld.vec(n("block_sparse_moe.routed_expert_norm.weight"));
      m.latent_up = ld.matrix(n("block_sparse_moe.routed_expert_up_proj.weight"));
      m.shared_gate = ld.matrix(n("block_sparse_moe.shared_experts.gate_proj.weight"));
      m.shared_up = ld.matrix(n("block_sparse_moe.shared_experts.up_proj.weight"));
      m.shared_down = ld.matrix(n("block_sparse_moe.shared_experts.down_proj.weight"));
    }
  }
  w.bytes = ld.bytes;
  return w;
}

std::unique_ptr<ResidentExpertSource> load_resident_k3_experts(const K3Checkpoint& k) {
  std::vector<int64_t> moe_layers;
  for (int64_t l = 0; l < k.config.num_hidden_layers; ++l)
    if (k.config.is_moe_layer(l)) moe_layers.push_back(l);
  return std::make_unique<ResidentExpertSource>(
      k.config.num_hidden_layers, k.config.num_experts, moe_layers, k3_expert_record_bytes(k.config),
      [&](int64_t l, int64_t e, uint8_t* out) { k.read_expert_record_into(l, e, out); });
}

}  // namespace deltafin
