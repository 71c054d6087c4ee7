#include "model/deepseek_v3/weights.h"

#include <set>

#include "model/deepseek_v3/expert_record.h"
#include "util/error.h"

namespace deltafin {

namespace {

std::string layer_name(int64_t l, const std::string& suffix) { return cat("model.layers.", l, ".", suffix); }

uint64_t blocks(uint64_t n) { return (n + 127) / 128; }

// A linear layer's tensors as this checkpoint stores it: BF16 "X.weight", or
// F8_E4M3 "X.weight" with its F32 "X.weight_scale_inv" block grid.
void append_linear(const Checkpoint* ck, const std::string& weight, uint64_t rows, uint64_t cols,
                   std::vector<TensorSpec>& out) {
  TensorRef ref = ck ? ck->find(weight) : TensorRef();
  if (ref && ref.info->dtype == DType::F8_E4M3) {
    out.push_back({weight, DType::F8_E4M3, {rows, cols}});
    out.push_back({fp8_scale_name(weight), DType::F32, {blocks(rows), blocks(cols)}});
  } else {
    out.push_back({weight, DType::BF16, {rows, cols}});
  }
}

void append_mlp(const Checkpoint* ck, const std::string& prefix, uint64_t d, uint64_t I, std::vector<TensorSpec>& out) {
  append_linear(ck, prefix + "gate_proj.weight", I, d, out);
  append_linear(ck, prefix + "up_proj.weight", I, d, out);
  append_linear(ck, prefix + "down_proj.weight", d, I, out);
}

void append_layer(const DeepseekV3Config& c, const Checkpoint* ck, int64_t l, std::vector<TensorSpec>& out) {
  const uint64_t d = c.hidden_size, H = c.num_attention_heads, dk = c.qk_head_dim();
  const uint64_t rkv = c.kv_lora_rank, rope = c.qk_rope_head_dim, nope = c.qk_nope_head_dim, dv = c.v_head_dim;
  out.push_back({layer_name(l, "input_layernorm.weight"), DType::BF16, {d}});
  if (c.q_lora_rank) {
    const uint64_t rq = c.q_lora_rank;
    append_linear(ck, layer_name(l, "self_attn.q_a_proj.weight"), rq, d, out);
    out.push_back({layer_name(l, "self_attn.q_a_layernorm.weight"), DType::BF16, {rq}});
    append_linear(ck, layer_name(l, "self_attn.q_b_proj.weight"), H * dk, rq, out);
  } else {
    append_linear(ck, layer_name(l, "self_attn.q_proj.weight"), H * dk, d, out);
  }
  append_linear(ck, layer_name(l, "self_attn.kv_a_proj_with_mqa.weight"), rkv + rope, d, out);
  out.push_back({layer_name(l, "self_attn.kv_a_layernorm.weight"), DType::BF16, {rkv}});
  append_linear(ck, layer_name(l, "self_attn.kv_b_proj.weight"), H * (nope + dv), rkv, out);
  append_linear(ck, layer_name(l, "self_attn.o_proj.weight"), d, H * dv, out);
  out.push_back({layer_name(l, "post_attention_layernorm.weight"), DType::BF16, {d}});
  if (!c.is_moe_layer(l)) {
    append_mlp(ck, layer_name(l, "mlp."), d, c.intermediate_size, out);
    return;
  }
  const uint64_t E = c.n_routed_experts;
  out.push_back({layer_name(l, "mlp.gate.weight"), DType::BF16, {E, d}});
  out.push_back({layer_name(l, "mlp.gate.e_score_correction_bias"), DType::F32, {E}});
  if (c.n_shared_experts > 0)
    append_mlp(ck, layer_name(l, "mlp.shared_experts."), d, c.n_shared_experts * c.moe_intermediate_size, out);
}

std::vector<TensorSpec> spine_specs(const DeepseekV3Config& c, const Checkpoint* ck) {
  const uint64_t d = c.hidden_size, V = c.vocab_size;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", DType::BF16, {V, d}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) append_layer(c, ck, l, out);
  out.push_back({"model.norm.weight", DType::BF16, {d}});
  out.push_back({"lm_head.weight", DType::BF16, {V, d}});
  return out;
}

// The MTP layer(s) after the last decoder layer: recognised by prefix.
bool is_mtp_tensor(const DeepseekV3Config& c, const std::string& name) {
  for (int64_t k = 0; k < c.num_nextn_predict_layers; ++k)
    if (name.rfind(layer_name(c.num_hidden_layers + k, ""), 0) == 0) return true;
  return false;
}

void check_spec(const Checkpoint& ck, const TensorSpec& t) {
  TensorRef ref = ck.find(t.name);
  if (!ref) fail(ck.dir(), ": tensor '", t.name, "' is missing");
  if (ref.info->dtype != t.dtype || ref.info->shape != t.shape) {
    std::string shape;
    for (uint64_t n : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(n);
    fail(ref.shard->path(), ": tensor '", t.name, "' is ", dtype_name(ref.info->dtype), " of another shape or dtype than ",
         dtype_name(t.dtype), " [", shape, "] that config.json gives");
  }
}

}  // namespace

MlaDims deepseek_v3_mla_dims(const DeepseekV3Config& c) {
  MlaDims d;
  d.heads = static_cast<size_t>(c.num_attention_heads);
  d.nope = static_cast<size_t>(c.qk_nope_head_dim);
  d.rope = static_cast<size_t>(c.qk_rope_head_dim);
  d.dv = static_cast<size_t>(c.v_head_dim);
  d.rank = static_cast<size_t>(c.kv_lora_rank);
  // q_a_layernorm and kv_a_layernorm are built with RMSNorm's default eps
  // (1e-6) in both transformers' DeepseekV3Attention and DeepSeek's
  // inference/model.py, not with rms_norm_eps (equal in every release).
  d.eps = 1e-6f;
  d.scale = c.softmax_scale();
  return d;
}

std::vector<TensorSpec> deepseek_v3_expert_specs(const DeepseekV3Config& c, int64_t l, int64_t e) {
  const uint64_t d = c.hidden_size, I = c.moe_intermediate_size;
  const std::string p = layer_name(l, cat("mlp.experts.", e, "."));
  const char* proj[3] = {"gate_proj", "up_proj", "down_proj"};
  const uint64_t shape[3][2] = {{I, d}, {I, d}, {d, I}};
  std::vector<TensorSpec> out;
  for (int i = 0; i < 3; ++i) {
    const uint64_t r = shape[i][0], k = shape[i][1];
    switch (c.quant) {
      case DsQuant::None: out.push_back({cat(p, proj[i], ".weight"), DType::BF16, {r, k}}); break;
      case DsQuant::Fp8Block: out.push_back({cat(p, proj[i], ".weight"), DType::F8_E4M3, {r, k}}); break;
      case DsQuant::Int4Experts: out.push_back({cat(p, proj[i], ".weight_packed"), DType::I32, {r, k / 8}}); break;
    }
  }
  for (int i = 0; i < 3; ++i) {
    const uint64_t r = shape[i][0], k = shape[i][1];
    if (c.quant == DsQuant::Fp8Block)
      out.push_back({cat(p, proj[i], ".weight_scale_inv"), DType::F32, {blocks(r), blocks(k)}});
    if (c.quant == DsQuant::Int4Experts) out.push_back({cat(p, proj[i], ".weight_scale"), DType::BF16, {r, k / 32}});
  }
  return out;
}

std::vector<TensorSpec> deepseek_v3_spine_specs(const DeepseekV3Config& c, const Checkpoint& ck) {
  return spine_specs(c, &ck);
}

void check_deepseek_v3_tensors(const DeepseekV3Config& c, const Checkpoint& ck) {
  if (c.quant == DsQuant::Int4Experts && c.moe_intermediate_size % 32 != 0)
    fail(ck.dir(), ": moe_intermediate_size = ", c.moe_intermediate_size, " is not a multiple of the INT4 group of 32");
  if (c.quant == DsQuant::Int4Experts && c.hidden_size % 32 != 0)
    fail(ck.dir(), ": hidden_size = ", c.hidden_size, " is not a multiple of the INT4 group of 32");
  std::set<std::string> expected;
  for (const TensorSpec& t : spine_specs(c, &ck)) {
    check_spec(ck, t);
    expected.insert(t.name);
  }
  for (int64_t l : c.moe_layers())
    for (int64_t e = 0; e < c.n_routed_experts; ++e)
      for (const TensorSpec& t : deepseek_v3_expert_specs(c, l, e)) {
        check_spec(ck, t);
        expected.insert(t.name);
        // compressed-tensors also writes each INT4 tensor's logical shape.
        if (c.quant == DsQuant::Int4Experts && t.name.ends_with(".weight_packed"))
          expected.insert(t.name.substr(0, t.name.size() - 7) + "_shape");
      }
  for (const std::string& name : ck.names())
    if (!expected.count(name) && !is_mtp_tensor(c, name))
      fail(ck.dir(), ": tensor '", name, "' is not part of the ", c.model_type,
           " architecture described by config.json");
}

DeepseekV3Weights load_deepseek_v3_weights(const DeepseekV3Config& c, const Checkpoint& ck) {
  check_deepseek_v3_tensors(c, ck);
  CheckpointSpineSource source(ck);
  return load_deepseek_v3_weights(c, source);
}

namespace {

// The spine loader: every tensor's shape checked against the config.
struct Loader {
  SpineTensorSource& s;
  uint64_t bytes = 0;
  Matrix matrix(const std::string& name, uint64_t rows, uint64_t cols) {
    Matrix m = s.matrix(name);
    if (m.rows != rows || m.cols != cols)
      fail("spine: tensor '", name, "' is [", m.rows, ", ", m.cols, "], config.json gives [", rows, ", ", cols, "]");
    bytes += m.bytes();
    return m;
  }
  std::vector<float> vec(const std::string& name, uint64_t n) {
    std::vector<float> v = s.vec(name);
    if (v.size() != n) fail("spine: tensor '", name, "' has ", v.size(), " values, config.json gives ", n);
    bytes += v.size() * 4;
    return v;
  }
  DsMlp mlp(const std::string& prefix, uint64_t d, uint64_t I) {
    return {matrix(prefix + "gate_proj.weight", I, d), matrix(prefix + "up_proj.weight", I, d),
            matrix(prefix + "down_proj.weight", d, I)};
  }
};

}  // namespace

DeepseekV3Weights load_deepseek_v3_weights(const DeepseekV3Config& c, SpineTensorSource& src) {
  Loader ld{src};
  const uint64_t d = c.hidden_size, V = c.vocab_size, H = c.num_attention_heads, dk = c.qk_head_dim();
  const uint64_t rkv = c.kv_lora_rank, rope = c.qk_rope_head_dim, nope = c.qk_nope_head_dim, dv = c.v_head_dim;
  DeepseekV3Weights w;
  w.embed = ld.matrix("model.embed_tokens.weight", V, d);
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  const MlaDims dims = deepseek_v3_mla_dims(c);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    DsLayerWeights& L = w.layers[static_cast<size_t>(l)];
    auto n = [&](const char* suffix) { return layer_name(l, suffix); };
    L.input_norm = ld.vec(n("input_layernorm.weight"), d);
    L.post_attention_norm = ld.vec(n("post_attention_layernorm.weight"), d);
    MlaWeights& a = L.mla;
    if (c.q_lora_rank) {
      const uint64_t rq = c.q_lora_rank;
      a.q_a = ld.matrix(n("self_attn.q_a_proj.weight"), rq, d);
      a.q_a_norm = ld.vec(n("self_attn.q_a_layernorm.weight"), rq);
      a.q_b = ld.matrix(n("self_attn.q_b_proj.weight"), H * dk, rq);
    } else {
      a.q = ld.matrix(n("self_attn.q_proj.weight"), H * dk, d);
    }
    a.kv_a = ld.matrix(n("self_attn.kv_a_proj_with_mqa.weight"), rkv + rope, d);
    a.kv_a_norm = ld.vec(n("self_attn.kv_a_layernorm.weight"), rkv);
    a.kv_b = ld.matrix(n("self_attn.kv_b_proj.weight"), H * (nope + dv), rkv);
    a.o = ld.matrix(n("self_attn.o_proj.weight"), d, H * dv);
    w.derived_bytes += mla_derive(a, dims);
    if (!c.is_moe_layer(l)) {
      L.dense = ld.mlp(n("mlp."), d, c.intermediate_size);
      continue;
    }
    L.router = ld.matrix(n("mlp.gate.weight"), c.n_routed_experts, d);
    L.router_bias = ld.vec(n("mlp.gate.e_score_correction_bias"), c.n_routed_experts);
    if (c.n_shared_experts > 0) L.shared = ld.mlp(n("mlp.shared_experts."), d, c.n_shared_experts * c.moe_intermediate_size);
  }
  w.final_norm = ld.vec("model.norm.weight", d);
  w.lm_head = ld.matrix("lm_head.weight", V, d);
  w.bytes = ld.bytes;
  return w;
}

void read_deepseek_v3_expert_record_into(const DeepseekV3Config& c, const Checkpoint& ck, int64_t l, int64_t e,
                                         uint8_t* out) {
  if (l < 0 || l >= c.num_hidden_layers || !c.is_moe_layer(l) || e < 0 || e >= c.n_routed_experts)
    fail(ck.dir(), ": no routed expert (layer ", l, ", expert ", e, ")");
  uint64_t at = 0;
  for (const TensorSpec& t : deepseek_v3_expert_specs(c, l, e)) {
    TensorRef ref = ck.find(t.name);
    if (!ref) fail(ck.dir(), ": tensor '", t.name, "' is missing");
    if (ref.info->dtype != t.dtype || ref.info->shape != t.shape)
      fail(ref.shard->path(), ": tensor '", t.name, "' is ", dtype_name(ref.info->dtype),
           " of another shape or dtype than config.json gives");
    ref.shard->read(*ref.info, out + at);
    at += t.bytes();
  }
}

std::unique_ptr<ResidentExpertSource> load_resident_deepseek_v3_experts(const DeepseekV3Config& c,
                                                                        const Checkpoint& ck) {
  return std::make_unique<ResidentExpertSource>(
      c.num_hidden_layers, c.n_routed_experts, c.moe_layers(), c.expert_record_bytes(),
      [&](int64_t l, int64_t e, uint8_t* out) { read_deepseek_v3_expert_record_into(c, ck, l, e, out); });
}

}  // namespace deltafin
