#include "k3_dspark/reference_dspark.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "format/checkpoint.h"
#include "util/file.h"

namespace deltafin::test {

namespace {

double bf16(uint8_t lo, uint8_t hi) {
  uint32_t u = (static_cast<uint32_t>(hi) << 24) | (static_cast<uint32_t>(lo) << 16);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Vec read_bf16(const Checkpoint& ck, const std::string& name) {
  TensorRef t = ck.find(name);
  if (!t) throw std::runtime_error("reference: missing tensor " + name);
  std::vector<uint8_t> raw(t.info->bytes());
  t.shard->read(*t.info, raw.data());
  Vec out(raw.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = bf16(raw[2 * i], raw[2 * i + 1]);
  return out;
}

// y = W x, W [rows][cols] row-major.
Vec matvec(const Vec& W, int rows, int cols, const Vec& x, int x_offset = 0) {
  Vec y(rows, 0.0);
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int c = 0; c < cols; ++c) s += W[static_cast<size_t>(r) * cols + c] * x[x_offset + c];
    y[r] = s;
  }
  return y;
}

// x / sqrt(mean(x²) + eps) ⊙ w
Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

}  // namespace

ReferenceDSpark::ReferenceDSpark(const std::string& dspark_dir, const std::string& target_dir) : dir_(dspark_dir) {
  nlohmann::json c = nlohmann::json::parse(read_text_file(dspark_dir + "/config.json"));
  h_ = c["hidden_size"], V_ = c["vocab_size"], layers_ = c["num_hidden_layers"], heads_ = c["num_attention_heads"];
  q_lora_ = c["q_lora_rank"], kv_lora_ = c["kv_lora_rank"], nope_ = c["qk_nope_head_dim"];
  rope_ = c["qk_rope_head_dim"], dv_ = c["v_head_dim"], inter_ = c["intermediate_size"], rank_ = c["markov_rank"];
  mask_ = c["mask_token_id"];
  eps_ = c["rms_norm_eps"];
  const nlohmann::json& rp = c["rope_parameters"];
  const double theta = rp["rope_theta"], factor = rp["factor"], L0 = rp["original_max_position_embeddings"];
  const double beta_fast = rp["beta_fast"], beta_slow = rp["beta_slow"], mscale_all = rp["mscale_all_dim"];
  // YaRN exactly as §10.2 writes it.
  const double d = rope_, pi = 3.14159265358979323846;
  auto corr = [&](double beta) { return d * std::log(L0 / (beta * 2 * pi)) / (2 * std::log(theta)); };
  double low = std::max(std::floor(corr(beta_fast)), 0.0);
  double high = std::min(std::ceil(corr(beta_slow)), d - 1);
  if (low == high) high += 0.001;
  for (int i = 0; i < rope_ / 2; ++i) {
    double base = std::pow(theta, -2.0 * i / d), interp = base / factor;
    double ramp = std::min(std::max((i - low) / (high - low), 0.0), 1.0);
    inv_freq_.push_back(interp * ramp + base * (1 - ramp));
  }
  double mscale = 0.1 * mscale_all * std::log(factor) + 1.0;
  scale_ = 1.0 / std::sqrt(static_cast<double>(nope_ + rope_)) * mscale * mscale;

  Checkpoint ck = Checkpoint::open(dspark_dir);
  auto t = [&](const std::string& n) { return read_bf16(ck, n); };
  context_proj_ = t("context_proj.weight");
  context_norm_ = t("context_norm.weight");
  final_norm_ = t("final_norm.weight");
  w1_ = t("markov_head.markov_w1.weight");
  w2_ = t("markov_head.markov_w2.weight");
  conf_w_ = t("confidence_head.proj.weight");
  conf_b_ = t("confidence_head.proj.bias")[0];
  for (int l = 0; l < layers_; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    Layer y;
    y.in_norm = t(p + "input_layernorm.weight");
    y.post_norm = t(p + "post_attention_layernorm.weight");
    y.q_a = t(p + "self_attn.q_a_proj.weight");
    y.q_a_norm = t(p + "self_attn.q_a_layernorm.weight");
    y.q_b = t(p + "self_attn.q_b_proj.weight");
    y.kv_a = t(p + "self_attn.kv_a_proj_with_mqa.weight");
    y.kv_a_norm = t(p + "self_attn.kv_a_layernorm.weight");
    y.kv_b = t(p + "self_attn.kv_b_proj.weight");
    y.o = t(p + "self_attn.o_proj.weight");
    y.gate = t(p + "mlp.gate_proj.weight");
    y.up = t(p + "mlp.up_proj.weight");
    y.down = t(p + "mlp.down_proj.weight");
    L_.push_back(y);
  }
  Checkpoint target = Checkpoint::open(target_dir);
  embed_ = read_bf16(target, "language_model.model.embed_tokens.weight");
  lm_head_ = read_bf16(target, "language_model.lm_head.weight");
  latent_.assign(layers_, {});
  k_rope_.assign(layers_, {});
}

Vec ReferenceDSpark::rope_rotate(const Vec& x, double position) const {
  Vec y(x.size());
  for (int i = 0; i < rope_ / 2; ++i) {
    double phase = position * inv_freq_[i], c = std::cos(phase), s = std::sin(phase);
    double e = x[2 * i], o = x[2 * i + 1];
    y[2 * i] = e * c - o * s;
    y[2 * i + 1] = o * c + e * s;
  }
  return y;
}

void ReferenceDSpark::append_context(const std::vector<Vec>& rows) {
  for (const Vec& row : rows) {
    const double pos = static_cast<double>(context_length());
    Vec c = rmsnorm(matvec(context_proj_, h_, static_cast<int>(row.size()), row), context_norm_, eps_);
    for (int l = 0; l < layers_; ++l) {
      Vec kv = matvec(L_[l].kv_a, kv_lora_ + rope_, h_, c);
      latent_[l].push_back(rmsnorm(Vec(kv.begin(), kv.begin() + kv_lora_), L_[l].kv_a_norm, eps_));
      k_rope_[l].push_back(rope_rotate(Vec(kv.begin() + kv_lora_, kv.end()), pos));
    }
  }
}

ReferenceDSpark::Result ReferenceDSpark::propose(uint32_t anchor, int n, const std::vector<uint32_t>& prev) const {
  const int Q = 7;
  const double first = static_cast<double>(context_length());
  std::vector<Vec> hidden(Q, Vec(h_)), residual;
  for (int t = 0; t < Q; ++t) {
    const int token = t == 0 ? static_cast<int>(anchor) : mask_;
    for (int i = 0; i < h_; ++i) hidden[t][i] = embed_[static_cast<size_t>(token) * h_ + i];
  }
  for (int l = 0; l < layers_; ++l) {
    const Layer& y = L_[l];
    std::vector<Vec> acc(Q, Vec(h_));
    for (int t = 0; t < Q; ++t)
      for (int i = 0; i < h_; ++i) acc[t][i] = (l == 0 ? 0.0 : residual[t][i]) + hidden[t][i];
    // MLA, non-absorbed: keys/values of every position expanded per head.
    std::vector<Vec> x(Q), q(Q);
    std::vector<Vec> keys_lat, keys_rope;  // context then the query rows
    for (size_t j = 0; j < context_length(); ++j) keys_lat.push_back(latent_[l][j]), keys_rope.push_back(k_rope_[l][j]);
    for (int t = 0; t < Q; ++t) {
      x[t] = rmsnorm(acc[t], y.in_norm, eps_);
      q[t] = matvec(y.q_b, heads_ * (nope_ + rope_), q_lora_, rmsnorm(matvec(y.q_a, q_lora_, h_, x[t]), y.q_a_norm, eps_));
      Vec kv = matvec(y.kv_a, kv_lora_ + rope_, h_, x[t]);
      keys_lat.push_back(rmsnorm(Vec(kv.begin(), kv.begin() + kv_lora_), y.kv_a_norm, eps_));
      keys_rope.push_back(rope_rotate(Vec(kv.begin() + kv_lora_, kv.end()), first + t));
    }
    const size_t K = keys_lat.size();
    // kv_b_proj per key: [heads][nope + dv]
    std::vector<Vec> kvb(K);
    for (size_t j = 0; j < K; ++j) kvb[j] = matvec(y.kv_b, heads_ * (nope_ + dv_), kv_lora_, keys_lat[j]);
    for (int t = 0; t < Q; ++t) {
      Vec o(heads_ * dv_, 0.0);
      for (int hd = 0; hd < heads_; ++hd) {
        const double* qh = &q[t][hd * (nope_ + rope_)];
        Vec q_rope(qh + nope_, qh + nope_ + rope_);
        Vec qr = rope_rotate(q_rope, first + t);
        Vec s(K);
        double m = -1e300;
        for (size_t j = 0; j < K; ++j) {
          double dotp = 0;
          for (int i = 0; i < nope_; ++i) dotp += qh[i] * kvb[j][hd * (nope_ + dv_) + i];
          for (int i = 0; i < rope_; ++i) dotp += qr[i] * keys_rope[j][i];
          s[j] = dotp * scale_;
          m = std::max(m, s[j]);
        }
        double z = 0;
        for (size_t j = 0; j < K; ++j) z += (s[j] = std::exp(s[j] - m));
        for (size_t j = 0; j < K; ++j)
          for (int i = 0; i < dv_; ++i) o[hd * dv_ + i] += s[j] / z * kvb[j][hd * (nope_ + dv_) + nope_ + i];
      }
      Vec a = matvec(y.o, h_, heads_ * dv_, o);
      for (int i = 0; i < h_; ++i) acc[t][i] += a[i];
    }
    for (int t = 0; t < Q; ++t) {
      Vec x2 = rmsnorm(acc[t], y.post_norm, eps_);
      Vec g = matvec(y.gate, inter_, h_, x2), u = matvec(y.up, inter_, h_, x2);
      for (int i = 0; i < inter_; ++i) g[i] = silu(g[i]) * u[i];
      hidden[t] = matvec(y.down, h_, inter_, g);
    }
    residual = acc;
  }
  Result r;
  for (int t = 0; t < Q; ++t) {
    Vec sum(h_);
    for (int i = 0; i < h_; ++i) sum[i] = residual[t][i] + hidden[t][i];
    r.out.push_back(rmsnorm(sum, final_norm_, eps_));
  }
  for (int j = 0; j < n; ++j) {
    const uint32_t p = j == 0 ? anchor : prev[j - 1];
    Vec w1row(w1_.begin() + static_cast<size_t>(p) * rank_, w1_.begin() + static_cast<size_t>(p + 1) * rank_);
    Vec s = matvec(lm_head_, V_, h_, r.out[j]);
    Vec b = matvec(w2_, V_, rank_, w1row);
    uint32_t best = 0;
    for (int v = 0; v < V_; ++v) {
      s[v] += b[v];
      if (s[v] > s[best]) best = static_cast<uint32_t>(v);
    }
    double second = -1e300;
    for (int v = 0; v < V_; ++v)
      if (static_cast<uint32_t>(v) != best) second = std::max(second, s[v]);
    double conf = conf_b_;
    for (int i = 0; i < h_; ++i) conf += conf_w_[i] * r.out[j][i];
    for (int i = 0; i < rank_; ++i) conf += conf_w_[h_ + i] * w1row[i];
    r.scores.push_back(s);
    r.tokens.push_back(best);
    r.margin.push_back(s[best] - second);
    r.confidence.push_back(conf);
  }
  return r;
}

}  // namespace deltafin::test
