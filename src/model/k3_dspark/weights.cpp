#include "model/k3_dspark/weights.h"

#include <set>

#include "format/checkpoint.h"
#include "model/common/spine_source.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

uint64_t u(int64_t x) { return static_cast<uint64_t>(x); }

std::string shape_text(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string layer_prefix(int64_t l) { return "layers." + std::to_string(l) + "."; }

// Reads checked tensors out of the checkpoint. Every tensor has been checked
// for presence, dtype and shape before anything is read.
class Reader {
public:
  explicit Reader(const Checkpoint& ckpt) : source_(ckpt) {}

  Matrix matrix(const std::string& name) {
    Matrix m = source_.matrix(name);
    bytes += m.storage.size();
    return m;
  }

  // BF16 widened to fp32: exact.
  std::vector<float> vec(const std::string& name) {
    std::vector<float> out = source_.vec(name);
    bytes += out.size() * sizeof(float);
    return out;
  }

  uint64_t bytes = 0;

private:
  CheckpointSpineSource source_;
};

}  // namespace

std::vector<DSparkTensor> dspark_tensor_list(const DSparkConfig& c) {
  const uint64_t h = u(c.hidden_size), V = u(c.vocab_size), r = u(c.markov_rank);
  const uint64_t H = u(c.num_attention_heads);
  std::vector<DSparkTensor> t;
  t.push_back({"embed_tokens.weight", {V, h}});
  t.push_back({"context_proj.weight", {h, u(c.context_width())}});
  t.push_back({"context_norm.weight", {h}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer_prefix(l);
    t.push_back({p + "input_layernorm.weight", {h}});
    t.push_back({p + "self_attn.q_a_proj.weight", {u(c.q_lora_rank), h}});
    t.push_back({p + "self_attn.q_a_layernorm.weight", {u(c.q_lora_rank)}});
    t.push_back({p + "self_attn.q_b_proj.weight", {H * u(c.qk_head_dim()), u(c.q_lora_rank)}});
    t.push_back({p + "self_attn.kv_a_proj_with_mqa.weight", {u(c.kv_lora_rank + c.qk_rope_head_dim), h}});
    t.push_back({p + "self_attn.kv_a_layernorm.weight", {u(c.kv_lora_rank)}});
    t.push_back({p + "self_attn.kv_b_proj.weight", {H * u(c.qk_nope_head_dim + c.v_head_dim), u(c.kv_lora_rank)}});
    t.push_back({p + "self_attn.o_proj.weight", {h, H * u(c.v_head_dim)}});
    t.push_back({p + "post_attention_layernorm.weight", {h}});
    t.push_back({p + "mlp.gate_proj.weight", {u(c.intermediate_size), h}});
    t.push_back({p + "mlp.up_proj.weight", {u(c.intermediate_size), h}});
    t.push_back({p + "mlp.down_proj.weight", {h, u(c.intermediate_size)}});
  }
  t.push_back({"final_norm.weight", {h}});
  t.push_back({"markov_head.markov_w1.weight", {V, r}});
  t.push_back({"markov_head.markov_w2.weight", {V, r}});
  t.push_back({"confidence_head.proj.weight", {1, h + r}});
  t.push_back({"confidence_head.proj.bias", {1}});
  return t;
}

DSparkWeights load_dspark_weights(const std::string& dir, const DSparkConfig& c) {
  Checkpoint ckpt = Checkpoint::open(dir);
  const std::vector<DSparkTensor> expected = dspark_tensor_list(c);
  std::set<std::string> known;
  for (const DSparkTensor& e : expected) {
    known.insert(e.name);
    TensorRef t = ckpt.find(e.name);
    if (!t) fail(dir, ": tensor ", e.name, " is missing from the DSpark checkpoint");
    if (t.info->dtype != DType::BF16)
      fail(t.shard->path(), ": tensor ", e.name, " has dtype ", dtype_name(t.info->dtype), ", expected BF16");
    if (t.info->shape != e.shape)
      fail(t.shard->path(), ": tensor ", e.name, " has shape ", shape_text(t.info->shape), ", expected ",
           shape_text(e.shape));
  }
  // Anything else is another model (or a layout this runtime would misread).
  for (const std::string& name : ckpt.names())
    if (!known.count(name))
      fail(ckpt.find(name).shard->path(), ": tensor ", name, " is not part of a DSpark checkpoint");

  Reader rd(ckpt);
  DSparkWeights w;
  w.context_proj = rd.matrix("context_proj.weight");
  w.context_norm = rd.vec("context_norm.weight");
  w.final_norm = rd.vec("final_norm.weight");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer_prefix(l);
    DSparkLayerWeights lw;
    lw.input_norm = rd.vec(p + "input_layernorm.weight");
    lw.post_attention_norm = rd.vec(p + "post_attention_layernorm.weight");
    lw.q_a = rd.matrix(p + "self_attn.q_a_proj.weight");
    lw.q_a_norm = rd.vec(p + "self_attn.q_a_layernorm.weight");
    lw.q_b = rd.matrix(p + "self_attn.q_b_proj.weight");
    lw.kv_a = rd.matrix(p + "self_attn.kv_a_proj_with_mqa.weight");
    lw.kv_a_norm = rd.vec(p + "self_attn.kv_a_layernorm.weight");
    lw.kv_b = rd.matrix(p + "self_attn.kv_b_proj.weight");
    lw.o = rd.matrix(p + "self_attn.o_proj.weight");
    lw.gate = rd.matrix(p + "mlp.gate_proj.weight");
    lw.up = rd.matrix(p + "mlp.up_proj.weight");
    lw.down = rd.matrix(p + "mlp.down_proj.weight");
    w.layers.push_back(std::move(lw));
  }
  w.markov_w1 = rd.matrix("markov_head.markov_w1.weight");
  w.markov_w2 = rd.matrix("markov_head.markov_w2.weight");
  w.confidence_w = rd.vec("confidence_head.proj.weight");
  w.confidence_bias = rd.vec("confidence_head.proj.bias")[0];
  w.bytes = rd.bytes;
  return w;
}

}  // namespace deltafin
