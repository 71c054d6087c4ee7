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

// The YaRN pieces, as the YaRN paper and transformers define them.
double yarn_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }
double correction_dim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2 * M_PI)) / (2 * std::log(base));
}

}  // namespace

ReferenceQwen3::ReferenceQwen3(const std::string& dir) {
  const json cfg = json::parse(read_text_file((fs::path(dir) / "config.json").string()));
  hidden_ = cfg.at("hidden_size").get<int64_t>();
  intermediate_ = cfg.value("intermediate_size", int64_t{0});
  layers_ = cfg.at("num_hidden_layers").get<int64_t>();
  heads_ = cfg.at("num_attention_heads").get<int64_t>();
  kv_heads_ = cfg.at("num_key_value_heads").get<int64_t>();
  head_dim_ = cfg.at("head_dim").get<int64_t>();
  vocab_ = cfg.at("vocab_size").get<int64_t>();
  eps_ = cfg.at("rms_norm_eps").get<double>();
  theta_ = cfg.at("rope_theta").get<double>();
  tied_ = cfg.value("tie_word_embeddings", false);
  const int64_t max_pos = cfg.at("max_position_embeddings").get<int64_t>();

  // RoPE, with YaRN when rope_scaling asks for it.
  const size_t half = static_cast<size_t>(head_dim_ / 2);
  for (size_t i = 0; i < half; ++i)
    inv_freq_.push_back(1.0 / std::pow(theta_, static_cast<double>(2 * i) / static_cast<double>(head_dim_)));
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object() &&
      cfg["rope_scaling"].value("rope_type", cfg["rope_scaling"].value("type", "default")) == "yarn") {
    const json& r = cfg["rope_scaling"];
    const double factor = r.at("factor").get<double>();
    const double L0 = r.value("original_max_position_embeddings", static_cast<double>(max_pos));
    const double dim = static_cast<double>(head_dim_);
    double lo = correction_dim(r.value("beta_fast", 32.0), dim, theta_, L0);
    double hi = correction_dim(r.value("beta_slow", 1.0), dim, theta_, L0);
    if (r.value("truncate", true)) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0), hi = std::min(hi, dim - 1);
    if (lo == hi) hi += 0.001;
    for (size_t i = 0; i < half; ++i) {
      const double ramp = std::min(1.0, std::max(0.0, (static_cast<double>(i) - lo) / (hi - lo)));
      const double extrapolate = 1 - ramp;
      inv_freq_[i] = inv_freq_[i] / factor * (1 - extrapolate) + inv_freq_[i] * extrapolate;
    }
    rope_factor_ = r.contains("attention_factor") ? r["attention_factor"].get<double>() : yarn_mscale(factor, 1.0);
  }

  // Qwen3MoeDecoderLayer: sparse when not in mlp_only_layers and
  // num_experts > 0 and (layer + 1) % decoder_sparse_step == 0.
  sparse_.assign(static_cast<size_t>(layers_), false);
  if (cfg.at("model_type") == "qwen3_moe") {
    experts_ = cfg.at("num_experts").get<int64_t>();
    top_k_ = cfg.at("num_experts_per_tok").get<int64_t>();
    moe_intermediate_ = cfg.at("moe_intermediate_size").get<int64_t>();
    norm_topk_ = cfg.value("norm_topk_prob", false);
    const int64_t step = cfg.value("decoder_sparse_step", 1);
    const std::vector<int64_t> mlp_only = cfg.value("mlp_only_layers", std::vector<int64_t>{});
    for (int64_t l = 0; l < layers_; ++l)
      sparse_[static_cast<size_t>(l)] = std::find(mlp_only.begin(), mlp_only.end(), l) == mlp_only.end() &&
                                        experts_ > 0 && (l + 1) % step == 0;
  }

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

// down(silu(gate(h)) * up(h)) with the projections under `prefix`.
std::vector<double> ReferenceQwen3::mlp(const std::string& prefix, const std::vector<double>& h, size_t I) const {
  const size_t d = hidden_;
  std::vector<double> gate = linear(tensor(prefix + "gate_proj.weight"), h, I, d);
  std::vector<double> up = linear(tensor(prefix + "up_proj.weight"), h, I, d);
  for (size_t i = 0; i < I; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  return linear(tensor(prefix + "down_proj.weight"), gate, d, I);
}

// Qwen3MoeSparseMoeBlock for one position: softmax over the router logits,
// top-k (torch.topk; ties, which random weights never produce, to the lower
// id), optional renormalisation, then the chosen experts' outputs times
// their weights, summed in expert-id order.
std::vector<double> ReferenceQwen3::sparse_moe(const std::string& prefix, const std::vector<double>& h) const {
  const size_t d = hidden_, E = experts_;
  std::vector<double> p = linear(tensor(prefix + "gate.weight"), h, E, d);
  const double m = *std::max_element(p.begin(), p.end());
  double z = 0;
  for (double& v : p) z += (v = std::exp(v - m));
  for (double& v : p) v /= z;
  std::vector<size_t> order(E);
  for (size_t e = 0; e < E; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  order.resize(static_cast<size_t>(top_k_));
  double chosen = 0;
  for (size_t e : order) chosen += p[e];
  std::sort(order.begin(), order.end());
  std::vector<double> out(d, 0.0);
  for (size_t e : order) {
    const double w = norm_topk_ ? p[e] / chosen : p[e];
    std::vector<double> y = mlp(prefix + "experts." + std::to_string(e) + ".", h, moe_intermediate_);
    for (size_t i = 0; i < d; ++i) out[i] += w * y[i];
  }
  return out;
}

std::vector<double> ReferenceQwen3::logits(const std::vector<uint32_t>& tokens) const {
  const size_t T = tokens.size(), d = hidden_, hd = head_dim_, H = heads_, KV = kv_heads_, V = vocab_, half = hd / 2;
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
            const double angle = static_cast<double>(p) * inv_freq_[i];
            const double c = std::cos(angle) * rope_factor_, s = std::sin(angle) * rope_factor_;
            vec[hh * hd + i] = n[i] * c - n[i + half] * s;
            vec[hh * hd + i + half] = n[i + half] * c + n[i] * s;
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
      const std::vector<double> y =
          sparse_[static_cast<size_t>(l)] ? sparse_moe(pre + "mlp.", h) : mlp(pre + "mlp.", h, intermediate_);
      for (size_t i = 0; i < d; ++i) x[p][i] += y[i];
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
