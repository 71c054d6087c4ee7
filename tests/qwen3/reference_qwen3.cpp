#include "qwen3/reference_qwen3.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "format/safetensors.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double bf16_value(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// out = rmsnorm(x) * w over n elements, in double.
std::vector<double> rms_norm(const double* x, const std::vector<double>& w, size_t n, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * r);
  return out;
}

// y = W x with W [rows, cols] row-major.
std::vector<double> linear(const std::vector<double>& W, const std::vector<double>& x, size_t rows, size_t cols) {
  std::vector<double> y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) y[r] += W[r * cols + c] * x[c];
  return y;
}

}  // namespace

ReferenceQwen3::ReferenceQwen3(const std::string& dir) {
  const json cfg = json::parse(read_text_file((fs::path(dir) / "config.json").string()));
  hidden_ = cfg.at("hidden_size").get<int64_t>();
  intermediate_ = cfg.at("intermediate_size").get<int64_t>();
  layers_ = cfg.at("num_hidden_layers").get<int64_t>();
  heads_ = cfg.at("num_attention_heads").get<int64_t>();
  kv_heads_ = cfg.at("num_key_value_heads").get<int64_t>();
  head_dim_ = cfg.at("head_dim").get<int64_t>();
  vocab_ = cfg.at("vocab_size").get<int64_t>();
  eps_ = cfg.at("rms_norm_eps").get<double>();
  theta_ = cfg.at("rope_theta").get<double>();
  tied_ = cfg.value("tie_word_embeddings", false);

  // The files: the index's shards, or model.safetensors.
  std::set<std::string> files;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    const json j = json::parse(read_text_file(index.string()));
    for (auto it = j.at("weight_map").begin(); it != j.at("weight_map").end(); ++it)
      files.insert(it.value().get<std::string>());
  } else {
    files.insert("model.safetensors");
  }
  for (const std::string& f : files) {
    SafetensorsFile file = SafetensorsFile::open((fs::path(dir) / f).string());
    for (const TensorInfo& t : file.tensors()) {
      if (t.dtype != DType::BF16) fail("reference: ", t.name, " is not BF16");
      std::vector<uint16_t> raw(t.bytes() / 2);
      file.read(t, raw.data());
      std::vector<double>& out = tensors_[t.name];
      for (uint16_t b : raw) out.push_back(bf16_value(b));
    }
  }
}

const std::vector<double>& ReferenceQwen3::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("reference: no tensor ", name);
  return it->second;
}

std::vector<double> ReferenceQwen3::logits(const std::vector<uint32_t>& tokens) const {
  const size_t T = tokens.size(), d = hidden_, hd = head_dim_, H = heads_, KV = kv_heads_, I = intermediate_,
               V = vocab_, half = hd / 2;
  const std::vector<double>& embed = tensor("model.embed_tokens.weight");
  std::vector<std::vector<double>> x(T);
  for (size_t p = 0; p < T; ++p) x[p].assign(embed.begin() + tokens[p] * d, embed.begin() + (tokens[p] + 1) * d);

  for (int64_t l = 0; l < layers_; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (size_t p = 0; p < T; ++p) {
      std::vector<double> h = rms_norm(x[p].data(), tensor(pre + "input_layernorm.weight"), d, eps_);
      q[p] = linear(tensor(pre + "self_attn.q_proj.weight"), h, H * hd, d);
      k[p] = linear(tensor(pre + "self_attn.k_proj.weight"), h, KV * hd, d);
      v[p] = linear(tensor(pre + "self_attn.v_proj.weight"), h, KV * hd, d);
      // Per-head RMSNorm over head_dim, then rotate-half RoPE at position p.
      auto norm_rope = [&](std::vector<double>& vec, size_t heads, const std::vector<double>& w) {
        for (size_t hh = 0; hh < heads; ++hh) {
          std::vector<double> n = rms_norm(vec.data() + hh * hd, w, hd, eps_);
          for (size_t i = 0; i < half; ++i) {
            const double angle = static_cast<double>(p) * std::pow(theta_, -2.0 * static_cast<double>(i) / hd);
            vec[hh * hd + i] = n[i] * std::cos(angle) - n[i + half] * std::sin(angle);
            vec[hh * hd + i + half] = n[i + half] * std::cos(angle) + n[i] * std::sin(angle);
          }
        }
      };
      norm_rope(q[p], H, tensor(pre + "self_attn.q_norm.weight"));
      norm_rope(k[p], KV, tensor(pre + "self_attn.k_norm.weight"));
    }
    for (size_t p = 0; p < T; ++p) {
      std::vector<double> attn(H * hd, 0.0);
      for (size_t hh = 0; hh < H; ++hh) {
        const size_t g = hh / (H / KV);
        std::vector<double> s(p + 1);
        double m = -INFINITY;
        for (size_t j = 0; j <= p; ++j) {
          double dotp = 0;
          for (size_t i = 0; i < hd; ++i) dotp += q[p][hh * hd + i] * k[j][g * hd + i];
          s[j] = dotp / std::sqrt(static_cast<double>(hd));
          m = std::max(m, s[j]);
        }
        double z = 0;
        for (size_t j = 0; j <= p; ++j) z += (s[j] = std::exp(s[j] - m));
        for (size_t j = 0; j <= p; ++j)
          for (size_t i = 0; i < hd; ++i) attn[hh * hd + i] += s[j] / z * v[j][g * hd + i];
      }
      std::vector<double> o = linear(tensor(pre + "self_attn.o_proj.weight"), attn, d, H * hd);
      for (size_t i = 0; i < d; ++i) x[p][i] += o[i];
      std::vector<double> h = rms_norm(x[p].data(), tensor(pre + "post_attention_layernorm.weight"), d, eps_);
      std::vector<double> gate = linear(tensor(pre + "mlp.gate_proj.weight"), h, I, d);
      std::vector<double> up = linear(tensor(pre + "mlp.up_proj.weight"), h, I, d);
      for (size_t i = 0; i < I; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      std::vector<double> down = linear(tensor(pre + "mlp.down_proj.weight"), gate, d, I);
      for (size_t i = 0; i < d; ++i) x[p][i] += down[i];
    }
  }
  const std::vector<double>& head = tied_ ? embed : tensor("lm_head.weight");
  std::vector<double> out(T * V);
  for (size_t p = 0; p < T; ++p) {
    std::vector<double> h = rms_norm(x[p].data(), tensor("model.norm.weight"), d, eps_);
    std::vector<double> y = linear(head, h, V, d);
    std::copy(y.begin(), y.end(), out.begin() + p * V);
  }
  return out;
}

}  // namespace deltafin::test
