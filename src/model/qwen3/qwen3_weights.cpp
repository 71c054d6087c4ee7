#include "model/qwen3/qwen3_weights.h"

#include <filesystem>
#include <memory>
#include <set>

#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

namespace fs = std::filesystem;

namespace {

std::string layer_name(int64_t i, const char* suffix) { return cat("model.layers.", i, ".", suffix); }

std::string shape_string(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += cat(i ? ", " : "", s[i]);
  return out + "]";
}

// The tensor `name` with the expected shape, or an error naming the shard.
const TensorInfo& expect_tensor(const Checkpoint& ck, const std::string& name, const std::vector<uint64_t>& shape,
                                const SafetensorsFile** shard) {
  TensorRef ref = ck.find(name);
  if (!ref) fail(ck.dir(), ": tensor '", name, "' is missing");
  if (ref.info->shape != shape)
    fail(ref.shard->path(), ": tensor '", name, "' has shape ", shape_string(ref.info->shape), ", expected ",
         shape_string(shape), " from config.json");
  *shard = ref.shard;
  return *ref.info;
}

Matrix load_matrix_impl(const Checkpoint& ck, const std::string& name, uint64_t rows, uint64_t cols) {
  const SafetensorsFile* shard = nullptr;
  const TensorInfo& t = expect_tensor(ck, name, {rows, cols}, &shard);
  // Matrices stay in their stored BF16 (the kernels widen exactly); other
  // types would need a conversion this draft model does not do.
  if (t.dtype != DType::BF16)
    fail(shard->path(), ": tensor '", name, "' is ", dtype_name(t.dtype), ", expected BF16");
  Matrix m;
  m.type = WeightType::BF16, m.rows = rows, m.cols = cols;
  m.storage.resize(rows * cols * 2);
  // safetensors is little-endian, as is every host this runtime builds for (x86-64).
  shard->read(t, m.storage.data());
  return m;
}

// A norm weight vector, widened to fp32 exactly (BF16 or F32 stored).
std::vector<float> load_vector_impl(const Checkpoint& ck, const std::string& name, uint64_t n) {
  const SafetensorsFile* shard = nullptr;
  const TensorInfo& t = expect_tensor(ck, name, {n}, &shard);
  std::vector<float> out(n);
  if (t.dtype == DType::BF16) {
    std::vector<uint16_t> raw(n);
    shard->read(t, raw.data());
    for (uint64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(raw[i]);
  } else if (t.dtype == DType::F32) {
    shard->read(t, out.data());
  } else {
    fail(shard->path(), ": tensor '", name, "' is ", dtype_name(t.dtype), ", expected BF16 or F32");
  }
  return out;
}

}  // namespace

void append_qwen3_attention_specs(const Qwen3Config& c, int64_t i, std::vector<TensorSpec>& out) {
  const uint64_t d = c.hidden_size, hd = c.head_dim, q = c.q_dim(), kv = c.kv_dim();
  out.push_back({layer_name(i, "input_layernorm.weight"), DType::BF16, {d}});
  out.push_back({layer_name(i, "self_attn.q_proj.weight"), DType::BF16, {q, d}});
  out.push_back({layer_name(i, "self_attn.k_proj.weight"), DType::BF16, {kv, d}});
  out.push_back({layer_name(i, "self_attn.v_proj.weight"), DType::BF16, {kv, d}});
  out.push_back({layer_name(i, "self_attn.o_proj.weight"), DType::BF16, {d, q}});
  out.push_back({layer_name(i, "self_attn.q_norm.weight"), DType::BF16, {hd}});
  out.push_back({layer_name(i, "self_attn.k_norm.weight"), DType::BF16, {hd}});
}

std::vector<TensorSpec> qwen3_tensor_specs(const Qwen3Config& c) {
  const uint64_t d = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", DType::BF16, {V, d}});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    append_qwen3_attention_specs(c, i, out);
    out.push_back({layer_name(i, "post_attention_layernorm.weight"), DType::BF16, {d}});
    out.push_back({layer_name(i, "mlp.gate_proj.weight"), DType::BF16, {I, d}});
    out.push_back({layer_name(i, "mlp.up_proj.weight"), DType::BF16, {I, d}});
    out.push_back({layer_name(i, "mlp.down_proj.weight"), DType::BF16, {d, I}});
  }
  out.push_back({"model.norm.weight", DType::BF16, {d}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", DType::BF16, {V, d}});
  return out;
}

Matrix load_qwen3_matrix(const Checkpoint& ck, const std::string& name, uint64_t rows, uint64_t cols) {
  return load_matrix_impl(ck, name, rows, cols);
}

std::vector<float> load_qwen3_vector(const Checkpoint& ck, const std::string& name, uint64_t n) {
  return load_vector_impl(ck, name, n);
}

Qwen3AttentionWeights load_qwen3_attention(const Qwen3Config& c, const Checkpoint& ck, int64_t i) {
  CheckpointSpineSource source(ck);
  return load_qwen3_attention(c, source, i);
}

uint64_t qwen3_attention_bytes(const Qwen3AttentionWeights& a) {
  return a.q.bytes() + a.k.bytes() + a.v.bytes() + a.o.bytes() +
         (a.input_norm.size() + a.q_norm.size() + a.k_norm.size()) * 4;
}

Checkpoint open_qwen3_checkpoint(const std::string& dir) {
  if (!fs::is_directory(dir)) fail(dir, ": not a directory");
  return Checkpoint::open(dir);
}

Qwen3Weights load_qwen3_weights(const Qwen3Config& c, const Checkpoint& ck) {
  // Anything beyond the architecture's tensors means a different architecture
  // (or a config that does not describe this checkpoint): refuse it.
  std::set<std::string> expected;
  for (const TensorSpec& t : qwen3_tensor_specs(c)) expected.insert(t.name);
  for (const std::string& name : ck.names())
    if (!expected.count(name) && !(c.tie_word_embeddings && name == "lm_head.weight"))
      fail(ck.dir(), ": tensor '", name, "' is not part of the Qwen3 dense architecture described by config.json");

  const uint64_t d = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  Qwen3Weights w;
  w.embed = load_matrix_impl(ck, "model.embed_tokens.weight", V, d);
  w.layers.resize(c.num_hidden_layers);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    Qwen3LayerWeights& L = w.layers[i];
    L.attn = load_qwen3_attention(c, ck, i);
    L.post_attention_norm = load_vector_impl(ck, layer_name(i, "post_attention_layernorm.weight"), d);
    L.gate = load_matrix_impl(ck, layer_name(i, "mlp.gate_proj.weight"), I, d);
    L.up = load_matrix_impl(ck, layer_name(i, "mlp.up_proj.weight"), I, d);
    L.down = load_matrix_impl(ck, layer_name(i, "mlp.down_proj.weight"), d, I);
  }
  w.final_norm = load_vector_impl(ck, "model.norm.weight", d);
  if (!c.tie_word_embeddings) {
    w.lm_head = load_matrix_impl(ck, "lm_head.weight", V, d);
  } else if (ck.find("lm_head.weight")) {
    // Some exports of tied models still save lm_head.weight. Transformers ties
    // it to the embeddings anyway; accept it only when it says the same thing,
    // since a different matrix means the config and the weights disagree.
    Matrix head = load_matrix_impl(ck, "lm_head.weight", V, d);
    if (head.storage != w.embed.storage)
      fail(ck.dir(), ": config.json ties the embeddings (tie_word_embeddings = true) but lm_head.weight differs from "
                     "model.embed_tokens.weight");
  }

  auto matrix_bytes = [](const Matrix& m) { return m.bytes(); };
  w.bytes = matrix_bytes(w.embed) + matrix_bytes(w.lm_head) + w.final_norm.size() * 4;
  for (const Qwen3LayerWeights& L : w.layers)
    w.bytes += qwen3_attention_bytes(L.attn) + L.gate.bytes() + L.up.bytes() + L.down.bytes() +
               L.post_attention_norm.size() * 4;
  return w;
}

Qwen3Weights load_qwen3_weights(const Qwen3Config& config, const std::string& dir) {
  Checkpoint ck = open_qwen3_checkpoint(dir);
  return load_qwen3_weights(config, ck);
}

Matrix spine_bf16_matrix(SpineTensorSource& source, const std::string& name, uint64_t rows, uint64_t cols) {
  Matrix m = source.matrix(name);
  if (m.type != WeightType::BF16 || m.rows != rows || m.cols != cols)
    fail("spine tensor '", name, "': ", m.type == WeightType::BF16 ? "BF16" : "not BF16", " [", m.rows, ", ", m.cols,
         "], expected BF16 [", rows, ", ", cols, "] from config.json");
  return m;
}

std::vector<float> spine_vector(SpineTensorSource& source, const std::string& name, uint64_t n) {
  std::vector<float> v = source.vec(name);
  if (v.size() != n) fail("spine tensor '", name, "': ", v.size(), " elements, expected ", n, " from config.json");
  return v;
}

Qwen3AttentionWeights load_qwen3_attention(const Qwen3Config& c, SpineTensorSource& src, int64_t i) {
  const uint64_t d = c.hidden_size, hd = c.head_dim, q = c.q_dim(), kv = c.kv_dim();
  Qwen3AttentionWeights a;
  a.input_norm = spine_vector(src, layer_name(i, "input_layernorm.weight"), d);
  a.q = spine_bf16_matrix(src, layer_name(i, "self_attn.q_proj.weight"), q, d);
  a.k = spine_bf16_matrix(src, layer_name(i, "self_attn.k_proj.weight"), kv, d);
  a.v = spine_bf16_matrix(src, layer_name(i, "self_attn.v_proj.weight"), kv, d);
  a.o = spine_bf16_matrix(src, layer_name(i, "self_attn.o_proj.weight"), d, q);
  a.q_norm = spine_vector(src, layer_name(i, "self_attn.q_norm.weight"), hd);
  a.k_norm = spine_vector(src, layer_name(i, "self_attn.k_norm.weight"), hd);
  return a;
}

}  // namespace deltafin
