#include "deepseek_v3/reference_deepseek_v3.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "format/safetensors.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin::test {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- the pieces -------------------------------------------------------------

namespace {

// yarn_get_mscale of transformers and DeepSeek.
double get_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// find_correction_dim: the pair index whose wavelength makes `rotations`
// turns over the original context.
double correction_dim(double rotations, int dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2 * M_PI)) / (2 * std::log(base));
}

}  // namespace

std::vector<double> dsv3_inv_freq(int dim, const DsYarn& y) {
  const int half = dim / 2;
  std::vector<double> extrapolation(half), out(half);
  for (int i = 0; i < half; ++i) extrapolation[i] = 1.0 / std::pow(y.theta, static_cast<double>(2 * i) / dim);
  if (!y.enabled) return extrapolation;
  double low = correction_dim(y.beta_fast, dim, y.theta, y.original_max_positions);
  double high = correction_dim(y.beta_slow, dim, y.theta, y.original_max_positions);
  if (y.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a zero-width ramp
  for (int i = 0; i < half; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation_share = 1.0 - ramp;  // inv_freq_extrapolation_factor
    const double interpolation = extrapolation[i] / y.factor;
    out[i] = interpolation * (1.0 - extrapolation_share) + extrapolation[i] * extrapolation_share;
  }
  return out;
}

double dsv3_rope_attention_factor(const DsYarn& y) {
  if (!y.enabled) return 1.0;
  if (y.attention_factor) return *y.attention_factor;
  if (y.mscale != 0 && y.mscale_all_dim != 0) return get_mscale(y.factor, y.mscale) / get_mscale(y.factor, y.mscale_all_dim);
  return get_mscale(y.factor, 1.0);
}

double dsv3_softmax_scale(int qk_head_dim, const DsYarn& y) {
  double s = 1.0 / std::sqrt(static_cast<double>(qk_head_dim));
  if (y.enabled && y.mscale_all_dim != 0) {
    const double m = get_mscale(y.factor, y.mscale_all_dim);
    s *= m * m;
  }
  return s;
}

std::vector<double> dsv3_rope_interleaved(const std::vector<double>& x, const std::vector<double>& inv_freq,
                                          double attention_factor, double pos) {
  const size_t half = inv_freq.size();
  if (x.size() != 2 * half) fail("dsv3_rope_interleaved: ", x.size(), " values for ", half, " frequencies");
  std::vector<double> out(2 * half);
  for (size_t i = 0; i < half; ++i) {
    // HF: view(d/2, 2).transpose -> [x0, x2, ... | x1, x3, ...], then
    // q * cos + rotate_half(q) * sin with cos = cat(freqs, freqs).
    const double even = x[2 * i], odd = x[2 * i + 1];
    const double c = std::cos(pos * inv_freq[i]) * attention_factor, s = std::sin(pos * inv_freq[i]) * attention_factor;
    out[i] = even * c - odd * s;
    out[half + i] = odd * c + even * s;
  }
  return out;
}

DsRoute dsv3_route(const std::vector<double>& scores, const std::vector<double>& bias, const DsRouting& r) {
  const int n = static_cast<int>(scores.size());
  if (bias.size() != scores.size()) fail("dsv3_route: ", bias.size(), " biases for ", n, " experts");
  if (r.n_group < 1 || n % r.n_group || r.topk_group < 1 || r.topk_group > r.n_group)
    fail("dsv3_route: ", n, " experts in ", r.n_group, " groups, keeping ", r.topk_group);
  const int per_group = n / r.n_group;
  std::vector<double> choice(n);
  for (int e = 0; e < n; ++e) choice[e] = scores[e] + bias[e];

  // Group score: the sum of the group's two highest choices.
  std::vector<double> group_score(r.n_group);
  for (int g = 0; g < r.n_group; ++g) {
    std::vector<double> v(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
    std::sort(v.begin(), v.end(), std::greater<double>());
    group_score[g] = v[0] + (per_group > 1 ? v[1] : 0.0);
  }
  std::vector<int> groups(r.n_group);
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(), [&](int a, int b) { return group_score[a] > group_score[b]; });
  DsRoute out;
  out.kept_groups.assign(groups.begin(), groups.begin() + r.topk_group);
  std::sort(out.kept_groups.begin(), out.kept_groups.end());
  std::vector<bool> kept(n, false);
  for (int g : out.kept_groups)
    for (int e = g * per_group; e < (g + 1) * per_group; ++e) kept[e] = true;

  // Top-k of the choice among the kept experts (DeepSeek: the others are -inf).
  std::vector<int> candidates;
  for (int e = 0; e < n; ++e)
    if (kept[e]) candidates.push_back(e);
  if (static_cast<int>(candidates.size()) < r.top_k) fail("dsv3_route: top-", r.top_k, " of ", candidates.size(), " experts");
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return choice[a] > choice[b]; });
  out.experts.assign(candidates.begin(), candidates.begin() + r.top_k);
  // transformers fills the dropped experts with 0.0 instead: a dropped
  // expert then outranks a chosen one whose choice is below zero.
  const bool any_dropped = std::find(kept.begin(), kept.end(), false) != kept.end();
  out.hf_zero_fill_differs = any_dropped && choice[out.experts.back()] < 0.0;

  double sum = 0;
  for (int e : out.experts) sum += scores[e];
  for (int e : out.experts)
    out.weights.push_back((r.norm_topk_prob ? scores[e] / (sum + 1e-20) : scores[e]) * r.routed_scaling_factor);
  return out;
}

double dsv3_e4m3_value(uint8_t code) {
  const int sign = code >> 7, exponent = (code >> 3) & 15, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);  // (1 + m/8) 2^(e-7)
  return sign ? -magnitude : magnitude;
}

std::vector<int> dsv3_unpack_int4_row(const int32_t* words, int64_t cols) {
  std::vector<int> q(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    const uint32_t word = static_cast<uint32_t>(words[c / 8]);  // unsigned: no sign smearing on the shift
    q[c] = static_cast<int>((word >> (4 * (c % 8))) & 15u) - 8;
  }
  return q;
}

// ---- reading the checkpoint ------------------------------------------------------

// The shards and where each tensor is: the index's weight_map when there is
// one, else model.safetensors.
class ReferenceDeepseekV3::Tensors {
public:
  explicit Tensors(const std::string& dir) {
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    std::vector<std::string> files;
    if (fs::exists(index)) {
      const json j = json::parse(read_text_file(index.string()));
      for (const auto& [name, file] : j.at("weight_map").items())
        if (std::find(files.begin(), files.end(), file.get<std::string>()) == files.end()) files.push_back(file);
    } else {
      files.push_back("model.safetensors");
    }
    for (const std::string& f : files) {
      shards_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open((fs::path(dir) / f).string())));
      for (const TensorInfo& t : shards_.back()->tensors()) where_[t.name] = {shards_.back().get(), &t};
    }
  }

  bool has(const std::string& name) const { return where_.count(name) > 0; }
  const TensorInfo& info(const std::string& name) const { return *at(name).second; }
  std::vector<uint8_t> bytes(const std::string& name) const {
    const auto& [shard, t] = at(name);
    std::vector<uint8_t> b(t->bytes());
    shard->read(*t, b.data());
    return b;
  }

private:
  const std::pair<const SafetensorsFile*, const TensorInfo*>& at(const std::string& name) const {
    auto it = where_.find(name);
    if (it == where_.end()) fail("reference: the checkpoint has no tensor ", name);
    return it->second;
  }
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, std::pair<const SafetensorsFile*, const TensorInfo*>> where_;
};

namespace {

double bf16_value(const uint8_t* p) {
  const uint32_t u = static_cast<uint32_t>(p[0] | (p[1] << 8)) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double f32_value(const uint8_t* p) {
  uint32_t u = 0;
  for (int i = 3; i >= 0; --i) u = (u << 8) | p[i];
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
int64_t int_value(const uint8_t* p, size_t size) {
  uint64_t u = 0;
  for (int i = static_cast<int>(size) - 1; i >= 0; --i) u = (u << 8) | p[i];
  return size == 4 ? static_cast<int32_t>(u) : static_cast<int64_t>(u);
}

// A BF16 or F32 tensor's values.
std::vector<double> float_values(const TensorInfo& t, const std::vector<uint8_t>& b) {
  std::vector<double> v(t.elements());
  if (t.dtype == DType::BF16)
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_value(&b[2 * i]);
  else if (t.dtype == DType::F32)
    for (size_t i = 0; i < v.size(); ++i) v[i] = f32_value(&b[4 * i]);
  else
    fail("reference: ", t.name, " is ", dtype_name(t.dtype), ", expected BF16 or F32");
  return v;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  if (w.size() != x.size()) fail("reference: norm of ", x.size(), " values with ", w.size(), " weights");
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = w[i] * (x[i] * r);
  return out;
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// q_a_layernorm and kv_a_layernorm: DeepseekV3RMSNorm(rank), eps left at 1e-6.
constexpr double kLatentNormEps = 1e-6;

double number(const json& c, const char* key) {
  if (!c.contains(key) || !c[key].is_number()) fail("reference: config.json has no number ", key);
  return c[key].get<double>();
}
int64_t integer(const json& c, const char* key) { return static_cast<int64_t>(number(c, key)); }

}  // namespace

ReferenceDeepseekV3::ReferenceDeepseekV3(const std::string& dir) : tensors_(std::make_unique<Tensors>(dir)) {
  const json c = json::parse(read_text_file((fs::path(dir) / "config.json").string()));
  hidden_ = integer(c, "hidden_size");
  layers_ = integer(c, "num_hidden_layers");
  heads_ = integer(c, "num_attention_heads");
  q_lora_ = c.contains("q_lora_rank") && !c["q_lora_rank"].is_null() ? integer(c, "q_lora_rank") : 0;
  kv_lora_ = integer(c, "kv_lora_rank");
  nope_ = integer(c, "qk_nope_head_dim");
  rope_ = integer(c, "qk_rope_head_dim");
  v_dim_ = integer(c, "v_head_dim");
  intermediate_ = integer(c, "intermediate_size");
  moe_intermediate_ = integer(c, "moe_intermediate_size");
  experts_ = integer(c, "n_routed_experts");
  shared_ = integer(c, "n_shared_experts");
  vocab_ = integer(c, "vocab_size");
  first_dense_ = integer(c, "first_k_dense_replace");
  moe_freq_ = c.contains("moe_layer_freq") ? integer(c, "moe_layer_freq") : 1;
  mtp_ = c.contains("num_nextn_predict_layers") ? integer(c, "num_nextn_predict_layers") : 0;
  eps_ = number(c, "rms_norm_eps");
  tied_ = c.value("tie_word_embeddings", false);
  if (c.value("scoring_func", "sigmoid") != "sigmoid" || c.value("topk_method", "noaux_tc") != "noaux_tc")
    fail("reference: only sigmoid scoring with noaux_tc routing (got ", c.value("scoring_func", "?"), ", ",
         c.value("topk_method", "?"), ")");
  if (c.value("hidden_act", "silu") != "silu") fail("reference: hidden_act must be silu");
  if (c.value("attention_bias", false)) fail("reference: attention_bias true (no release has biases)");
  routing_.n_group = static_cast<int>(integer(c, "n_group"));
  routing_.topk_group = static_cast<int>(integer(c, "topk_group"));
  routing_.top_k = static_cast<int>(integer(c, "num_experts_per_tok"));
  routing_.norm_topk_prob = c.value("norm_topk_prob", false);
  routing_.routed_scaling_factor = number(c, "routed_scaling_factor");

  yarn_.theta = number(c, "rope_theta");
  if (c.contains("rope_scaling") && c["rope_scaling"].is_object()) {
    const json& r = c["rope_scaling"];
    const std::string type = r.value("rope_type", r.value("type", std::string("default")));
    if (type != "yarn") fail("reference: rope_scaling type ", type, " (only yarn)");
    yarn_.enabled = true;
    yarn_.factor = number(r, "factor");
    yarn_.original_max_positions = r.contains("original_max_position_embeddings")
                                       ? number(r, "original_max_position_embeddings")
                                       : number(c, "max_position_embeddings");
    // `or 32` / `or 1`: absent, null or 0 take the paper's values.
    yarn_.beta_fast = r.contains("beta_fast") && r["beta_fast"].is_number() && number(r, "beta_fast") != 0 ? number(r, "beta_fast") : 32;
    yarn_.beta_slow = r.contains("beta_slow") && r["beta_slow"].is_number() && number(r, "beta_slow") != 0 ? number(r, "beta_slow") : 1;
    yarn_.mscale = r.contains("mscale") && r["mscale"].is_number() ? number(r, "mscale") : 0;
    yarn_.mscale_all_dim = r.contains("mscale_all_dim") && r["mscale_all_dim"].is_number() ? number(r, "mscale_all_dim") : 0;
    if (r.contains("attention_factor") && r["attention_factor"].is_number()) yarn_.attention_factor = number(r, "attention_factor");
    yarn_.truncate = r.value("truncate", true);
  }
  inv_freq_ = dsv3_inv_freq(static_cast<int>(rope_), yarn_);
  rope_factor_ = dsv3_rope_attention_factor(yarn_);
  softmax_scale_ = dsv3_softmax_scale(static_cast<int>(nope_ + rope_), yarn_);

  if (c.contains("quantization_config") && c["quantization_config"].is_object()) {
    const json& q = c["quantization_config"];
    if (q.contains("weight_block_size")) {
      fp8_block_rows_ = q["weight_block_size"].at(0).get<int64_t>();
      fp8_block_cols_ = q["weight_block_size"].at(1).get<int64_t>();
    }
    if (q.contains("config_groups")) {
      const json& w = q["config_groups"].begin().value().at("weights");
      if (w.value("num_bits", 0) != 4 || !w.value("symmetric", false) || w.value("type", "") != "int")
        fail("reference: only symmetric 4-bit int pack-quantized weights");
      int4_group_ = w.at("group_size").get<int64_t>();
    }
  }
}

ReferenceDeepseekV3::~ReferenceDeepseekV3() = default;

// ---- weights ----------------------------------------------------------------------

const ReferenceDeepseekV3::Matrix& ReferenceDeepseekV3::matrix(const std::string& base) const {
  auto it = matrices_.find(base);
  if (it != matrices_.end()) return it->second;
  Matrix m;
  const Tensors& t = *tensors_;
  if (t.has(base + ".weight")) {
    const TensorInfo& info = t.info(base + ".weight");
    if (info.shape.size() != 2) fail("reference: ", info.name, " is not a matrix");
    m.rows = static_cast<int64_t>(info.shape[0]), m.cols = static_cast<int64_t>(info.shape[1]);
    const std::vector<uint8_t> b = t.bytes(info.name);
    if (info.dtype == DType::F8_E4M3) {
      // DeepSeek's weight_dequant: each 128 x 128 block (partial at the edges) times its scale.
      const TensorInfo& si = t.info(base + ".weight_scale_inv");
      const std::vector<double> scale = float_values(si, t.bytes(si.name));
      const int64_t srows = ceil_div(m.rows, fp8_block_rows_), scols = ceil_div(m.cols, fp8_block_cols_);
      if (si.shape.size() != 2 || static_cast<int64_t>(si.shape[0]) != srows || static_cast<int64_t>(si.shape[1]) != scols)
        fail("reference: ", si.name, " is not [", srows, ", ", scols, "]");
      m.w.resize(b.size());
      for (int64_t r = 0; r < m.rows; ++r)
        for (int64_t col = 0; col < m.cols; ++col)
          m.w[r * m.cols + col] = dsv3_e4m3_value(b[r * m.cols + col]) *
                                  scale[(r / fp8_block_rows_) * scols + col / fp8_block_cols_];
    } else {
      m.w = float_values(info, b);
    }
  } else {
    // compressed-tensors pack-quantized: codes times the group's scale.
    const TensorInfo& pi = t.info(base + ".weight_packed");
    const TensorInfo& shi = t.info(base + ".weight_shape");
    const TensorInfo& sci = t.info(base + ".weight_scale");
    if (pi.dtype != DType::I32) fail("reference: ", pi.name, " is not I32");
    if ((shi.dtype != DType::I32 && shi.dtype != DType::I64) || shi.elements() != 2)
      fail("reference: ", shi.name, " is not two I32/I64 values");
    const std::vector<uint8_t> sb = t.bytes(shi.name);
    const size_t isz = dtype_size(shi.dtype);
    m.rows = int_value(&sb[0], isz), m.cols = int_value(&sb[isz], isz);
    const int64_t words = ceil_div(m.cols, 8), groups = ceil_div(m.cols, int4_group_);
    if (pi.shape != std::vector<uint64_t>{static_cast<uint64_t>(m.rows), static_cast<uint64_t>(words)})
      fail("reference: ", pi.name, " is not [", m.rows, ", ", words, "]");
    if (sci.shape != std::vector<uint64_t>{static_cast<uint64_t>(m.rows), static_cast<uint64_t>(groups)})
      fail("reference: ", sci.name, " is not [", m.rows, ", ", groups, "]");
    const std::vector<uint8_t> pb = t.bytes(pi.name);
    const std::vector<double> scale = float_values(sci, t.bytes(sci.name));
    std::vector<int32_t> row_words(static_cast<size_t>(words));
    m.w.resize(static_cast<size_t>(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r) {
      for (int64_t j = 0; j < words; ++j) row_words[j] = static_cast<int32_t>(int_value(&pb[(r * words + j) * 4], 4));
      const std::vector<int> q = dsv3_unpack_int4_row(row_words.data(), m.cols);
      for (int64_t col = 0; col < m.cols; ++col) m.w[r * m.cols + col] = q[col] * scale[r * groups + col / int4_group_];
    }
  }
  for (double v : m.w)
    if (!std::isfinite(v)) fail("reference: ", base, " decodes to a value that is not finite");
  return matrices_.emplace(base, std::move(m)).first->second;
}

const std::vector<double>& ReferenceDeepseekV3::vec(const std::string& name) const {
  auto it = vectors_.find(name);
  if (it != vectors_.end()) return it->second;
  const TensorInfo& info = tensors_->info(name);
  return vectors_.emplace(name, float_values(info, tensors_->bytes(name))).first->second;
}

std::vector<double> ReferenceDeepseekV3::apply(const std::string& base, const std::vector<double>& x) const {
  const Matrix& m = matrix(base);
  if (static_cast<int64_t>(x.size()) != m.cols) fail("reference: ", base, " takes ", m.cols, " inputs, got ", x.size());
  std::vector<double> y(static_cast<size_t>(m.rows), 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    const double* w = &m.w[r * m.cols];
    double s = 0;
    for (int64_t c = 0; c < m.cols; ++c) s += w[c] * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> ReferenceDeepseekV3::norm(const std::string& weight, const std::vector<double>& x) const {
  return rms_norm(x, vec(weight), eps_);
}

// ---- the forward pass --------------------------------------------------------------------

bool ReferenceDeepseekV3::is_moe(int64_t layer) const {
  // transformers: layer_idx >= first_k_dense_replace; the released remote
  // code also asks layer_idx % moe_layer_freq == 0.
  return layer >= first_dense_ && layer % moe_freq_ == 0;
}

std::vector<std::vector<double>> ReferenceDeepseekV3::attention(const std::string& p,
                                                                const std::vector<std::vector<double>>& y,
                                                                int64_t start) const {
  const size_t T = y.size();
  const int64_t qk = nope_ + rope_;
  // Per position: q [H, nope + rope] (rope part rotated), k_nope and v [H, ...]
  // from the latent, one k_pe shared by all heads (rotated).
  std::vector<std::vector<double>> q(T), kv(T), k_pe(T);
  for (size_t t = 0; t < T; ++t) {
    const double pos = static_cast<double>(start + static_cast<int64_t>(t));
    // The two latent norms are DeepseekV3RMSNorm(rank) with the class's
    // default eps 1e-6, not rms_norm_eps (DeepSeek's RMSNorm(rank) likewise).
    q[t] = q_lora_ > 0 ? apply(p + ".q_b_proj", rms_norm(apply(p + ".q_a_proj", y[t]), vec(p + ".q_a_layernorm.weight"),
                                                         kLatentNormEps))
                       : apply(p + ".q_proj", y[t]);
    const std::vector<double> c = apply(p + ".kv_a_proj_with_mqa", y[t]);
    const std::vector<double> latent(c.begin(), c.begin() + kv_lora_);
    kv[t] = apply(p + ".kv_b_proj", rms_norm(latent, vec(p + ".kv_a_layernorm.weight"), kLatentNormEps));
    k_pe[t] = dsv3_rope_interleaved(std::vector<double>(c.begin() + kv_lora_, c.end()), inv_freq_, rope_factor_, pos);
    for (int64_t h = 0; h < heads_; ++h) {
      double* qh = &q[t][h * qk];
      const std::vector<double> rotated =
          dsv3_rope_interleaved(std::vector<double>(qh + nope_, qh + qk), inv_freq_, rope_factor_, pos);
      std::copy(rotated.begin(), rotated.end(), qh + nope_);
    }
  }
  const int64_t kvw = nope_ + v_dim_;  // kv_b's rows per head: [k_nope | v]
  std::vector<std::vector<double>> out(T);
  for (size_t t = 0; t < T; ++t) {
    std::vector<double> o(static_cast<size_t>(heads_ * v_dim_), 0.0);
    for (int64_t h = 0; h < heads_; ++h) {
      const double* qh = &q[t][h * qk];
      std::vector<double> score(t + 1);
      double top = -std::numeric_limits<double>::infinity();
      for (size_t s = 0; s <= t; ++s) {
        const double* kn = &kv[s][h * kvw];
        double dot = 0;
        for (int64_t i = 0; i < nope_; ++i) dot += qh[i] * kn[i];
        for (int64_t i = 0; i < rope_; ++i) dot += qh[nope_ + i] * k_pe[s][i];
        score[s] = dot * softmax_scale_;
        top = std::max(top, score[s]);
      }
      double sum = 0;
      for (double& v : score) sum += (v = std::exp(v - top));
      for (size_t s = 0; s <= t; ++s) {
        const double* v = &kv[s][h * kvw + nope_];
        for (int64_t i = 0; i < v_dim_; ++i) o[h * v_dim_ + i] += score[s] / sum * v[i];
      }
    }
    out[t] = apply(p + ".o_proj", o);
  }
  return out;
}

std::vector<double> ReferenceDeepseekV3::mlp(const std::string& p, const std::vector<double>& y) const {
  const std::vector<double> g = apply(p + ".gate_proj", y), u = apply(p + ".up_proj", y);
  std::vector<double> a(g.size());
  for (size_t i = 0; i < g.size(); ++i) a[i] = silu(g[i]) * u[i];
  return apply(p + ".down_proj", a);
}

std::vector<double> ReferenceDeepseekV3::moe(const std::string& p, const std::vector<double>& y, DsRoute* route) const {
  const std::vector<double> logits = apply(p + ".gate", y);
  std::vector<double> scores(logits.size());
  for (size_t e = 0; e < logits.size(); ++e) scores[e] = 1.0 / (1.0 + std::exp(-logits[e]));
  const DsRoute r = dsv3_route(scores, vec(p + ".gate.e_score_correction_bias"), routing_);
  // transformers' DeepseekV3MoE.moe: experts in id order, each output times its weight.
  std::vector<std::pair<int, double>> picked;
  for (size_t k = 0; k < r.experts.size(); ++k) picked.emplace_back(r.experts[k], r.weights[k]);
  std::sort(picked.begin(), picked.end());
  std::vector<double> out(y.size(), 0.0);
  for (const auto& [e, w] : picked) {
    const std::vector<double> f = mlp(p + ".experts." + std::to_string(e), y);
    for (size_t i = 0; i < out.size(); ++i) out[i] += w * f[i];
  }
  const std::vector<double> s = mlp(p + ".shared_experts", y);
  for (size_t i = 0; i < out.size(); ++i) out[i] += s[i];
  if (route) *route = r;
  return out;
}

std::vector<std::vector<double>> ReferenceDeepseekV3::decoder_layer(int64_t layer,
                                                                    const std::vector<std::vector<double>>& x,
                                                                    int64_t start, std::vector<DsRoute>* routes) const {
  const std::string p = "model.layers." + std::to_string(layer);
  const size_t T = x.size();
  std::vector<std::vector<double>> n(T);
  for (size_t t = 0; t < T; ++t) n[t] = norm(p + ".input_layernorm.weight", x[t]);
  const std::vector<std::vector<double>> a = attention(p + ".self_attn", n, start);
  std::vector<std::vector<double>> out(T);
  if (routes) routes->assign(is_moe(layer) ? T : 0, DsRoute{});
  for (size_t t = 0; t < T; ++t) {
    std::vector<double> h = x[t];
    for (size_t i = 0; i < h.size(); ++i) h[i] += a[t][i];
    const std::vector<double> m = norm(p + ".post_attention_layernorm.weight", h);
    const std::vector<double> f = is_moe(layer) ? moe(p + ".mlp", m, routes ? &(*routes)[t] : nullptr) : mlp(p + ".mlp", m);
    for (size_t i = 0; i < h.size(); ++i) h[i] += f[i];
    out[t] = std::move(h);
  }
  return out;
}

ReferenceDeepseekV3::Pass ReferenceDeepseekV3::forward(const std::vector<uint32_t>& tokens) const {
  const Matrix& embed = matrix("model.embed_tokens");
  std::vector<std::vector<double>> x;
  for (uint32_t tok : tokens) {
    if (tok >= static_cast<uint64_t>(embed.rows)) fail("reference: token ", tok, " is outside the vocabulary");
    x.emplace_back(embed.w.begin() + tok * embed.cols, embed.w.begin() + (tok + 1) * embed.cols);
  }
  Pass pass;
  for (int64_t l = 0; l < layers_; ++l) {
    std::vector<DsRoute> routes;
    x = decoder_layer(l, x, 0, &routes);
    if (is_moe(l)) pass.routes.push_back(std::move(routes));
  }
  const std::string head = tied_ && !tensors_->has("lm_head.weight") ? "model.embed_tokens" : "lm_head";
  for (const std::vector<double>& row : x) {
    const std::vector<double> h = norm("model.norm.weight", row);
    const std::vector<double> l = apply(head, h);
    pass.hidden.insert(pass.hidden.end(), h.begin(), h.end());
    pass.logits.insert(pass.logits.end(), l.begin(), l.end());
  }
  return pass;
}

std::vector<double> ReferenceDeepseekV3::mtp_logits(const std::vector<double>& hidden, const std::vector<uint32_t>& tokens,
                                                    int64_t start, std::vector<DsRoute>* routes) const {
  if (mtp_ < 1) fail("reference: the checkpoint has no MTP layer (num_nextn_predict_layers 0)");
  if (hidden.size() != tokens.size() * static_cast<size_t>(hidden_))
    fail("reference: mtp_logits takes one hidden row per token");
  const std::string p = "model.layers." + std::to_string(layers_);
  const Matrix& embed = matrix(p + ".embed_tokens");
  std::vector<std::vector<double>> z;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<double> e(static_cast<size_t>(hidden_), 0.0);  // vLLM: inputs_embeds[positions == 0] = 0
    if (start + static_cast<int64_t>(i) != 0)
      e.assign(embed.w.begin() + tokens[i] * embed.cols, embed.w.begin() + (tokens[i] + 1) * embed.cols);
    const std::vector<double> h(hidden.begin() + i * hidden_, hidden.begin() + (i + 1) * hidden_);
    std::vector<double> cat = norm(p + ".enorm.weight", e);
    const std::vector<double> hn = norm(p + ".hnorm.weight", h);
    cat.insert(cat.end(), hn.begin(), hn.end());
    z.push_back(apply(p + ".eh_proj", cat));
  }
  const std::vector<std::vector<double>> x = decoder_layer(layers_, z, start, routes);
  std::vector<double> logits;
  for (const std::vector<double>& row : x) {
    const std::vector<double> l = apply(p + ".shared_head.head", norm(p + ".shared_head.norm.weight", row));
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

}  // namespace deltafin::test
