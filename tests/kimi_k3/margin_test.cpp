// Where the fast fp32 pass loses its exactness margin (issue 34): the fast
// path against the float64 reference layer by layer, over many seeds and a
// few shapes. The DISABLED_K3Margin studies are measurements, not checks
// (seconds to minutes); run them with
//   build/release/tests/test_kimi_k3 --gtest_also_run_disabled_tests
//       --gtest_filter='DISABLED_K3Margin.*'
// DELTAFIN_MARGIN_SEEDS (default 24, from seed 101: the in-process tests use
// 1-3), DELTAFIN_MARGIN_PRESETS (default "tiny:16,tiny:64,small:32",
// preset:positions), DELTAFIN_MARGIN_EXACT (PerLayerErrorsWithExactOps: the
// ops computed exactly) and DELTAFIN_MARGIN_VERBOSE=1 (every layer of every
// case) change what they run. K3LayerExactness is the enabled check built on
// the same run.
//
// How. The model runs on a ProbeBackend: the CPU backend, plus two taps on
// ops K3's pass issues once per layer anyway — the BF16 capture (every layer
// captured: its source is h after the layer) and the MLP-side Mix (its last
// value is p = prefix + a, after the attention; the layer is known by the
// pseudo-query's address). Both taps read the fp32 rows, and can overwrite
// them with the reference's values rounded to fp32 before the op runs:
//   propagated: nothing overwritten; the error of p and h at each layer is
//     everything before it, carried;
//   local: every p and h overwritten, so the error of p at layer i is that
//     layer's AttnRes + norm + attention alone (from fp32-rounded exact inputs,
//     its KDA state or MLA cache built from them too), the error of h the
//     AttnRes + norm + MLP alone, and the logits' the tail's alone;
//   from side s: only the sides before s overwritten (side 2i: layer i's
//     attention side, 2i + 1 its MLP side): where the logits' error starts.
// The probe can also compute chosen ops in double from their fp32 inputs,
// rounded once (better than any fp32 order of that op), and the reference can
// round p and h to fp32 after every layer (the rounding no fp32 pass avoids).
// Routes are the fast path's, forced on the reference (k3-model.md §12).
//
// What it found (this commit's pass, 324 held-out cases up to 128 positions):
// every layer alone is far inside 1e-5 (MLA sides <= 1.5e-7, the smallest of
// any layer; MLP sides <= 6.4e-7; KDA sides <= 3.5e-6); the logits' worst
// position reaches 3.3e-5 only through the depth, which multiplies the early
// layers' errors 10-50 times (layers 0-1 exact: the worst of tiny:16 drops
// from 2.45e-5 to 3.2e-6). The MLA does not decide it: attention_latent in
// double, or the expanded (pre-latent) form, gives the same distribution,
// each case moving by -25% .. +54%. Every op in double (rounded once) gives
// 7.5e-6 at worst over the 72 default cases; leaving matmul, rmsnorm or the
// KDA recurrence in fp32 among them brings it back to 1.7e-5, 1.3e-5, 1.6e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "kernels/ops.h"
#include "kimi_k3/reference_k3.h"
#include "model/common/make_checkpoint.h"
#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/model.h"
#include "model/kimi_k3/weights.h"
#include "support/test_support.h"
#include "util/error.h"

namespace deltafin {
namespace k3_margin_test {
namespace {

using Grid = std::vector<std::vector<std::vector<double>>>;  // [layer][position][i]

double rel_l2(const float* a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

// The CPU backend with the two taps described above, and optional exact
// replacements of single ops (each computed in double from its fp32 inputs
// and rounded once: what no fp32 order can beat for that op).
class ProbeBackend final : public Backend {
public:
  explicit ProbeBackend(const K3Weights& w) : w_(w) {}

  // What a pass records: [layer] -> T * hidden floats.
  std::vector<std::vector<float>> p_rows, h_rows;
  // Set: overwrite p / h with these (rounded to fp32) as the pass reaches them.
  const Grid* reset_p = nullptr;
  const Grid* reset_h = nullptr;
  // Overwrite only the sides before this one: side 2i is layer i's p (its
  // attention side), 2i + 1 its h (its MLP side).
  size_t reset_sides = SIZE_MAX;
  // Ops computed in double from their fp32 inputs and rounded once (what no
  // fp32 order can beat for that op), by name: matmul, gated (gated_matmul),
  // norm (rmsnorm), sigmoid (mul_sigmoid), mix (depth_mix), wsum
  // (weighted_sum), store (latent_store), latent (attention_latent), kda
  // (kda_recurrence: per row, its outputs and state rounded once), or all.
  std::set<std::string> exact;
  bool is_exact(const char* op) const { return exact.count(op) || exact.count("all"); }

  void begin_pass(size_t layers) {
    p_rows.assign(layers, {});
    h_rows.assign(layers, {});
    capture_ = 0;
  }

  const char* name() const override { return "probe"; }
  void write(Act& d, size_t r, std::span<const float> h) override { cpu_.write(d, r, h); }
  void read(const Act& s, size_t r, std::span<float> h) override { cpu_.read(s, r, h); }
  void copy(const Act& s, Act& d) override { cpu_.copy(s, d); }
  void copy_rows(const Act& s, size_t f, Act& d) override { cpu_.copy_rows(s, f, d); }
  void place_rows(const Act& s, size_t f, Act& d) override { cpu_.place_rows(s, f, d); }
  void copy_cols(const Act& s, size_t sc, size_t n, Act& d, size_t dc) override { cpu_.copy_cols(s, sc, n, d, dc); }
  void round_bf16(const Act& s, Act& d, size_t dc) override {
    // Every layer is captured, in layer order: the k-th capture of a pass is h after layer k.
    tap(s, capture_, 2 * capture_ + 1, h_rows, reset_h);
    ++capture_;
    cpu_.round_bf16(s, d, dc);
  }
  void embed(const WeightView& t, std::span<const uint32_t> ids, Act& o) override { cpu_.embed(t, ids, o); }
  void matmul(const WeightView& w, const Act& x, Act& y) override {
    if (!is_exact("matmul")) return cpu_.matmul(w, x, y);
    const std::vector<double> ys = product(w, host(x));
    cpu_.write(y, 0, rounded(ys));
  }
  void gated_matmul(const WeightView& g, const WeightView& u, const Act& x, Gate fn, Act& h) override {
    if (!is_exact("gated")) return cpu_.gated_matmul(g, u, x, fn, h);
    const std::vector<float> xs = host(x);
    const std::vector<double> gs = product(g, xs), us = product(u, xs);
    std::vector<double> hs(gs.size());
    for (size_t i = 0; i < gs.size(); ++i)
      hs[i] = fn.kind == Gate::Kind::SiTU ? std::tanh(gs[i] / fn.beta) * fn.beta * sig(gs[i]) * std::tanh(us[i] / fn.beta_lin) * fn.beta_lin
                                          : gs[i] * sig(gs[i]) * us[i];
    cpu_.write(h, 0, rounded(hs));
  }
  void rmsnorm(const Act& x, std::span<const float> w, float eps, Act& y) override {
    const bool scale_only = is_exact("norm_scale");  // only r = 1 / sqrt(var + eps) from the fp32 dot, in double
    if (!is_exact("norm") && !scale_only) return cpu_.rmsnorm(x, w, eps, y);
    const std::vector<float> xs = host(x);
    std::vector<float> ys(xs.size());
    const size_t d = x.width();
    for (size_t t = 0; t < x.rows(); ++t) {
      const float* xr = xs.data() + t * d;
      float* yr = ys.data() + t * d;
      if (!scale_only) {
        norm_row(xr, w, d, eps, yr);
        continue;
      }
      const float var = deltafin::dot(xr, xr, d) / static_cast<float>(d);
      const float r = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var) + static_cast<double>(eps)));
      for (size_t i = 0; i < d; ++i) yr[i] = w.empty() ? xr[i] * r : w[i] * (xr[i] * r);
    }
    cpu_.write(y, 0, ys);
  }
  void rmsnorm_heads(Act& x, std::span<const float> w, size_t hd, float eps) override { cpu_.rmsnorm_heads(x, w, hd, eps); }
  void rope_half(Act& x, size_t hd, const Act& c, const Act& s) override { cpu_.rope_half(x, hd, c, s); }
  void rope_pairs(Act& x, size_t hd, const Act& c, const Act& s) override { cpu_.rope_pairs(x, hd, c, s); }
  void add(Act& x, const Act& d) override { cpu_.add(x, d); }
  void mul_sigmoid(Act& x, const Act& g) override {
    if (!is_exact("sigmoid")) return cpu_.mul_sigmoid(x, g);
    std::vector<float> xs = host(x);
    const std::vector<float> gs = host(g);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(xs[i] * sig(gs[i]));
    cpu_.write(x, 0, xs);
  }
  void depth_mix(std::span<const Act* const> v, std::span<const float> s, float eps, Act& o) override {
    for (size_t i = 0; i < w_.layers.size(); ++i)
      if (s.data() == w_.layers[i].s_mlp.data()) tap(*v.back(), i, 2 * i, p_rows, reset_p);
    if (!is_exact("mix")) return cpu_.depth_mix(v, s, eps, o);
    const size_t T = o.rows(), d = o.width(), n = v.size();
    std::vector<std::vector<float>> vs;
    for (const Act* a : v) vs.push_back(host(*a));
    std::vector<float> os(T * d);
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> alpha(n);
      double m = -INFINITY, sum = 0;
      for (size_t j = 0; j < n; ++j) {
        const float* x = vs[j].data() + t * d;
        double ss = 0, dot = 0;
        for (size_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
        const double r = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
        for (size_t i = 0; i < d; ++i) dot += x[i] * r * s[i];
        m = std::max(m, alpha[j] = dot);
      }
      for (double& a : alpha) sum += (a = std::exp(a - m));
      for (size_t i = 0; i < d; ++i) {
        double acc = 0;
        for (size_t j = 0; j < n; ++j) acc += alpha[j] / sum * vs[j][t * d + i];
        os[t * d + i] = static_cast<float>(acc);
      }
    }
    cpu_.write(o, 0, os);
  }
  void weighted_sum(const Act& y, std::span<const float> w, size_t k, Act& o) override {
    if (!is_exact("wsum")) return cpu_.weighted_sum(y, w, k, o);
    const std::vector<float> ys = host(y);
    const size_t n = o.rows(), d = o.width();
    std::vector<float> os(n * d);
    for (size_t t = 0; t < n; ++t)
      for (size_t c = 0; c < d; ++c) {
        double acc = 0;
        for (size_t i = 0; i < k; ++i) acc += static_cast<double>(ys[(t * k + i) * d + c]) * w[t * k + i];
        os[t * d + c] = static_cast<float>(acc);
      }
    cpu_.write(o, 0, os);
  }
  void gather(const Act& s, std::span<const uint32_t> r, Act& d) override { cpu_.gather(s, r, d); }
  void scatter(const Act& s, std::span<const uint32_t> r, Act& d) override { cpu_.scatter(s, r, d); }
  void kv_store(const Act& k, const Act& v, KvLayer c, int64_t s) override { cpu_.kv_store(k, v, c, s); }
  bool attention_gqa(const Act& q, KvLayer c, const GqaShape& s, Act& o, const std::function<bool()>& stop) override {
    return cpu_.attention_gqa(q, c, s, o, stop);
  }
  void latent_store(const Act& ckv, std::span<const float> w, float eps, LatentLayer c, int64_t s) override {
    if (!is_exact("store")) return cpu_.latent_store(ckv, w, eps, c, s);
    const std::vector<float> xs = host(ckv);
    const size_t R = c.width();
    for (size_t t = 0; t < ckv.rows(); ++t) {
      float* row = c.rows + (static_cast<size_t>(s) + t) * R;
      norm_row(xs.data() + t * R, w, c.rank, eps, row);
      std::copy(xs.data() + t * R + c.rank, xs.data() + (t + 1) * R, row + c.rank);
    }
  }
  bool attention_latent(const Act& q, LatentLayer c, const MlaShape& s, Act& u, const std::function<bool()>& stop) override {
    if (!is_exact("latent")) return cpu_.attention_latent(q, c, s, u, stop);
    latent_in_double(q, c, s, u);
    return true;
  }
  void kda_recurrence(const Act& q, const Act& k, const Act& v, const Act& g, const Act& r, const Act& b,
                      const KdaParams& p, KdaLayerState st, const KdaTrace* tr, Act& o) override {
    if (!is_exact("kda")) return cpu_.kda_recurrence(q, k, v, g, r, b, p, st, tr, o);
    kda_in_double(q, k, v, g, r, b, p, st, o);
  }
  void kda_replay(const KdaParams& p, KdaLayerState st, const KdaSteps& steps, size_t rows) override {
    cpu_.kda_replay(p, st, steps, rows);
  }
  void run_experts(std::span<const size_t> rows, const std::function<void(size_t)>& compute) override {
    cpu_.run_experts(rows, compute);
  }

private:
  static double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

  std::vector<float> host(const Act& a) {
    std::vector<float> x(a.size());
    cpu_.read(a, 0, x);
    return x;
  }
  static std::vector<float> rounded(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }

  // x W^T per row, in double.
  static std::vector<double> product(const WeightView& w, const std::vector<float>& xs) {
    const size_t T = xs.size() / w.cols;
    std::vector<double> wd(w.rows * w.cols), ys(T * w.rows);
    for (size_t r = 0; r < w.rows; ++r)
      for (size_t c = 0; c < w.cols; ++c) wd[r * w.cols + c] = weight_at(w, r, c);
    for (size_t t = 0; t < T; ++t)
      for (size_t r = 0; r < w.rows; ++r) {
        double acc = 0;
        for (size_t c = 0; c < w.cols; ++c) acc += wd[r * w.cols + c] * xs[t * w.cols + c];
        ys[t * w.rows + r] = acc;
      }
    return ys;
  }

  // RMSNorm of one row in double (w empty: no weight), rounded once.
  static void norm_row(const float* x, std::span<const float> w, size_t d, float eps, float* out) {
    double ss = 0;
    for (size_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (size_t i = 0; i < d; ++i) out[i] = static_cast<float>((w.empty() ? 1.0 : w[i]) * (x[i] * r));
  }

  // Records the rows of `a` as layer `layer`'s, then overwrites them from `reset`.
  void tap(const Act& a, size_t layer, size_t side, std::vector<std::vector<float>>& into, const Grid* reset) {
    std::vector<float>& rows = into.at(layer);
    rows.resize(a.size());
    cpu_.read(a, 0, rows);
    if (!reset || side >= reset_sides) return;
    const size_t d = a.width();
    std::vector<float> exact(a.size());
    for (size_t t = 0; t < a.rows(); ++t)
      for (size_t i = 0; i < d; ++i) exact[t * d + i] = static_cast<float>((*reset)[layer][t][i]);
    cpu_.write(const_cast<Act&>(a), 0, exact);  // the tap's purpose: the pass goes on from exact values
  }

  // Backend::attention_latent's definition in double, rounded once per value.
  void latent_in_double(const Act& q, LatentLayer c, const MlaShape& s, Act& u) {
    const size_t T = q.rows(), H = s.heads, R = c.width(), rank = c.rank;
    std::vector<float> qs(q.size()), us(u.size());
    cpu_.read(q, 0, qs);
    for (size_t t = 0; t < T; ++t) {
      const size_t n = static_cast<size_t>(s.start) + t + 1;
      for (size_t h = 0; h < H; ++h) {
        std::vector<double> sc(n);
        double m = -INFINITY;
        for (size_t j = 0; j < n; ++j) {
          double acc = 0;
          for (size_t i = 0; i < R; ++i) acc += static_cast<double>(qs[t * H * R + h * R + i]) * c.rows[j * R + i];
          sc[j] = acc * s.scale;
          m = std::max(m, sc[j]);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - m));
        for (size_t i = 0; i < rank; ++i) {
          double acc = 0;
          for (size_t j = 0; j < n; ++j) acc += sc[j] / sum * c.rows[j * R + i];
          us[t * H * rank + h * rank + i] = static_cast<float>(acc);
        }
      }
    }
    cpu_.write(u, 0, us);
  }

  // Backend::kda_recurrence's definition in double from its fp32 inputs and
  // state; per row, the state and the outputs rounded once to fp32 (a T-row
  // call stays T one-row calls).
  void kda_in_double(const Act& q, const Act& k, const Act& v, const Act& gate, const Act& r, const Act& b,
                     const KdaParams& p, KdaLayerState st, Act& o) {
    const size_t T = q.rows(), H = p.heads, K = p.head_dim, D = H * K, kernel = p.kernel;
    const std::vector<float> qs = host(q), ks = host(k), vs = host(v), gs = host(gate), rs = host(r), bs = host(b);
    std::vector<float> os(T * D);
    auto conv = [&](const float* x, std::span<const float> w, float* win, std::vector<double>& out) {
      out.resize(D);
      for (size_t c = 0; c < D; ++c) {
        for (size_t j = 0; j + 1 < kernel; ++j) win[c * kernel + j] = win[c * kernel + j + 1];
        win[c * kernel + kernel - 1] = x[c];
        double acc = 0;
        for (size_t j = 0; j < kernel; ++j) acc += static_cast<double>(w[c * kernel + j]) * win[c * kernel + j];
        out[c] = acc * sig(acc);
      }
    };
    std::vector<double> qc, kc, vc, S(K * K), on(K);
    for (size_t t = 0; t < T; ++t) {
      conv(qs.data() + t * D, p.q_conv, st.conv_q, qc);
      conv(ks.data() + t * D, p.k_conv, st.conv_k, kc);
      conv(vs.data() + t * D, p.v_conv, st.conv_v, vc);
      for (size_t h = 0; h < H; ++h) {
        for (std::vector<double>* x : {&qc, &kc}) {
          double ss = 0;
          for (size_t c = 0; c < K; ++c) ss += (*x)[h * K + c] * (*x)[h * K + c];
          const double n = std::max(std::sqrt(ss), 1e-12);
          for (size_t c = 0; c < K; ++c) (*x)[h * K + c] /= n;
        }
        for (size_t c = 0; c < K; ++c) qc[h * K + c] *= p.q_scale;
        float* Sf = st.recurrent + h * K * K;
        for (size_t i = 0; i < K * K; ++i) S[i] = Sf[i];
        const double beta = sig(bs[t * H + h]);
        for (size_t a = 0; a < K; ++a) {
          const size_t i = h * K + a;
          const double g = p.lower * sig(std::exp(static_cast<double>(p.a_log[a])) * (static_cast<double>(rs[t * D + i]) + p.dt_bias[i]));
          for (size_t c = 0; c < K; ++c) S[a * K + c] *= std::exp(g);
        }
        for (size_t c = 0; c < K; ++c) {
          double pred = 0;
          for (size_t a = 0; a < K; ++a) pred += kc[h * K + a] * S[a * K + c];
          const double delta = vc[h * K + c] - pred;
          for (size_t a = 0; a < K; ++a) S[a * K + c] += beta * kc[h * K + a] * delta;
        }
        double ss = 0;
        for (size_t c = 0; c < K; ++c) {
          double acc = 0;
          for (size_t a = 0; a < K; ++a) acc += qc[h * K + a] * S[a * K + c];
          on[c] = acc;
          ss += acc * acc;
        }
        const double rr = 1.0 / std::sqrt(ss / static_cast<double>(K) + p.eps);
        for (size_t c = 0; c < K; ++c)
          os[t * D + h * K + c] = static_cast<float>(p.o_norm[c] * (on[c] * rr) * sig(gs[t * D + h * K + c]));
        for (size_t i = 0; i < K * K; ++i) Sf[i] = static_cast<float>(S[i]);
      }
    }
    cpu_.write(o, 0, os);
  }

  Slot acquire(size_t floats) override {
    std::lock_guard<std::mutex> lock(mutex_);
    slots_.push_back(std::make_unique<std::vector<float>>(floats));
    return {static_cast<uint32_t>(slots_.size() - 1), slots_.back()->data()};
  }
  void release(uint32_t) override {}  // kept until the backend dies (one study's buffers)

  const K3Weights& w_;
  size_t capture_ = 0;
  CpuBackend cpu_{nullptr};
  std::mutex mutex_;
  std::vector<std::unique_ptr<std::vector<float>>> slots_;
};

struct Shape {
  std::string preset;
  size_t positions = 0;
};

// A generated checkpoint with its resident weights and experts.
struct Model {
  test::TempDir dir;
  K3Checkpoint ckpt;
  K3Weights weights;
  std::unique_ptr<ResidentExpertSource> experts;
};

std::unique_ptr<Model> make_model(const std::string& preset, uint64_t seed) {
  auto m = std::make_unique<Model>();
  MakeCheckpointRequest r;
  r.out = m->dir.path() + "/ckpt";
  r.preset = preset;
  r.seed = seed;
  r.progress = false;
  make_k3_checkpoint(r);
  m->ckpt = load_k3_checkpoint(r.out);
  m->weights = load_k3_weights(m->ckpt);
  m->experts = load_resident_k3_experts(m->ckpt);
  return m;
}

// One pass's errors: [layer][position] for p and h, [position] for the logits.
struct Errors {
  std::vector<std::vector<double>> p, h;
  std::vector<double> logits;
};

struct CaseErrors {
  Errors propagated, local;
  bool routes_held = true;  // the local run chose the propagated run's experts
  // from[s]: the logits' errors when the sides before s are exact (p or h
  // overwritten) and the rest the fast path's (from[0]: propagated, from[2L]:
  // the tail alone); with Options::from_side only.
  std::vector<std::vector<double>> from;
  // The reference with p and h rounded to fp32 after every layer, against the
  // reference: per position (Options::floor only).
  std::vector<double> floor;
};

std::vector<std::vector<double>> grid_errors(const std::vector<std::vector<float>>& fast, const Grid& ref, size_t d) {
  std::vector<std::vector<double>> e(ref.size());
  for (size_t l = 0; l < ref.size(); ++l)
    if (fast.size() != ref.size() || fast[l].size() != ref[l].size() * d)
      fail("margin study: the probe saw no rows of layer ", l, " (K3's pass no longer issues the ops it taps?)");
  for (size_t l = 0; l < ref.size(); ++l)
    for (size_t t = 0; t < ref[l].size(); ++t) e[l].push_back(rel_l2(fast[l].data() + t * d, ref[l][t]));
  return e;
}

Errors pass_errors(ProbeBackend& be, const Rows& logits, const test::ReferenceResult& ref, size_t d) {
  Errors e;
  e.p = grid_errors(be.p_rows, ref.after_attention, d);
  e.h = grid_errors(be.h_rows, ref.after_layer, d);
  for (size_t t = 0; t < ref.logits.size(); ++t) e.logits.push_back(rel_l2(logits.row(t), ref.logits[t]));
  return e;
}

std::vector<std::vector<std::vector<int>>> routes_of(const K3Model& m) {
  std::vector<std::vector<std::vector<int>>> r(m.last_routes().size());
  for (size_t l = 1; l < r.size(); ++l)
    for (const Route& x : m.last_routes()[l]) r[l].emplace_back(x.experts.begin(), x.experts.end());
  return r;
}

struct Options {
  std::set<std::string> exact;  // ProbeBackend::exact
  bool from_side = false;   // CaseErrors::from
  bool floor = false;       // CaseErrors::floor
};

std::vector<double> logits_errors(const std::vector<std::vector<double>>& got, const test::ReferenceResult& ref) {
  std::vector<double> e;
  for (size_t t = 0; t < ref.logits.size(); ++t) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.logits[t].size(); ++i) {
      num += (got[t][i] - ref.logits[t][i]) * (got[t][i] - ref.logits[t][i]);
      den += ref.logits[t][i] * ref.logits[t][i];
    }
    e.push_back(std::sqrt(num / den));
  }
  return e;
}

CaseErrors run_case(Model& m, const std::vector<uint32_t>& tokens, const Options& o = {}) {
  const K3Config& c = m.ckpt.config;
  const size_t L = static_cast<size_t>(c.num_hidden_layers), d = static_cast<size_t>(c.hidden_size);
  ProbeBackend be(m.weights);
  be.exact = o.exact;
  K3Model model(c, m.weights, *m.experts, be);
  std::vector<int64_t> all(L);
  for (size_t l = 0; l < L; ++l) all[l] = static_cast<int64_t>(l);
  model.set_capture_layers(all);

  CaseErrors run;
  be.begin_pass(L);
  std::unique_ptr<ModelSession> s = model.new_session();
  const Rows logits = model.forward(*s, tokens, true);
  const auto routes = routes_of(model);
  test::ReferenceOptions ro;
  ro.forced_routes = &routes;
  ro.keep_states = true;
  const test::ReferenceResult ref = test::reference_forward(m.ckpt, tokens, ro);
  run.propagated = pass_errors(be, logits, ref, d);

  be.begin_pass(L);
  be.reset_p = &ref.after_attention;
  be.reset_h = &ref.after_layer;
  std::unique_ptr<ModelSession> s2 = model.new_session();
  const Rows logits2 = model.forward(*s2, tokens, true);
  run.routes_held = routes_of(model) == routes;
  run.local = pass_errors(be, logits2, ref, d);

  if (o.from_side) {
    for (size_t from = 0; from <= 2 * L; ++from) {
      be.begin_pass(L);
      be.reset_sides = from;
      std::unique_ptr<ModelSession> s3 = model.new_session();
      const Rows lg = model.forward(*s3, tokens, true);
      run.from.push_back(pass_errors(be, lg, ref, d).logits);
    }
    be.reset_sides = SIZE_MAX;
  }
  if (o.floor) {
    test::ReferenceOptions rounded = ro;
    rounded.keep_states = false;
    rounded.round_states = true;
    run.floor = logits_errors(test::reference_forward(m.ckpt, tokens, rounded).logits, ref);
  }
  return run;
}

// ---- Reporting ----------------------------------------------------------------

double worst(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
size_t worst_at(const std::vector<double>& v) { return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string layer_name(const K3Config& c, size_t l) {
  std::string s = c.layer_kinds[l] == LayerKind::KDA ? "KDA" : "MLA";
  s += c.is_moe_layer(static_cast<int64_t>(l)) ? "+MoE" : "+dense";
  return s;
}

// The i-th word of a space-separated list of layer names.
std::string kinds_of(const std::string& kinds, size_t i) {
  std::stringstream ss(kinds);
  std::string k;
  for (size_t j = 0; j <= i; ++j) ss >> k;
  return k;
}

std::vector<Shape> shapes_from_env() {
  const char* env = std::getenv("DELTAFIN_MARGIN_PRESETS");
  std::string spec = env ? env : "tiny:16,tiny:64,small:32";
  std::vector<Shape> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    out.push_back({item.substr(0, colon), colon == std::string::npos ? 16 : std::stoul(item.substr(colon + 1))});
  }
  return out;
}

uint64_t seeds_from_env() {
  const char* env = std::getenv("DELTAFIN_MARGIN_SEEDS");
  return env ? std::stoull(env) : 24;
}

bool verbose() { return std::getenv("DELTAFIN_MARGIN_VERBOSE") != nullptr; }

// Held-out seeds: the in-process reference tests use 1, 2, 3.
constexpr uint64_t kFirstSeed = 101;

// Per shape, over the seeds: the logits' worst and median of the per-case
// worst; per layer (kind), the worst local attention and MLP errors and the
// worst propagated h error; for the worst cases, the whole layer table.
void study(const Options& o, const char* title) {
  std::printf("\n==== %s ====\n", title);
  for (const Shape& shape : shapes_from_env()) {
    std::vector<double> case_worst, case_local_tail;
    std::vector<std::vector<double>> attn_local, mlp_local, h_prop;  // [layer] -> per case worst
    std::vector<std::vector<double>> from;                             // [first fast layer] -> per case worst
    std::vector<double> floor_worst;
    std::string kinds;
    size_t held = 0;
    const uint64_t n = seeds_from_env();
    for (uint64_t seed = kFirstSeed; seed < kFirstSeed + n; ++seed) {
      std::unique_ptr<Model> m = make_model(shape.preset, seed);
      const K3Config& c = m->ckpt.config;
      const size_t L = static_cast<size_t>(c.num_hidden_layers);
      const std::vector<uint32_t> tokens = test::random_tokens(seed, shape.positions, static_cast<uint32_t>(c.vocab_size));
      const CaseErrors r = run_case(*m, tokens, o);
      held += r.routes_held;
      attn_local.resize(L), mlp_local.resize(L), h_prop.resize(L);
      // A local run that chose other experts (a near-tie decided the other
      // way from the exact inputs) compares another MLP: left out of the local figures.
      for (size_t l = 0; l < L; ++l) {
        if (r.routes_held) attn_local[l].push_back(worst(r.local.p[l]));
        if (r.routes_held) mlp_local[l].push_back(worst(r.local.h[l]));
        h_prop[l].push_back(worst(r.propagated.h[l]));
      }
      case_worst.push_back(worst(r.propagated.logits));
      if (r.routes_held) case_local_tail.push_back(worst(r.local.logits));
      from.resize(r.from.size());
      for (size_t i = 0; i < r.from.size(); ++i) from[i].push_back(worst(r.from[i]));
      if (o.floor) floor_worst.push_back(worst(r.floor));
      std::printf("%s:%zu seed %llu: logits worst %.3g at position %zu (median position %.3g); tail alone %.3g%s\n",
                  shape.preset.c_str(), shape.positions, static_cast<unsigned long long>(seed),
                  worst(r.propagated.logits), worst_at(r.propagated.logits), median(r.propagated.logits),
                  worst(r.local.logits), r.routes_held ? "" : " (local run chose other experts)");
      if (o.floor)
        std::printf("    fp32-rounded p and h alone (the floor): worst %.3g at position %zu\n", worst(r.floor),
                    worst_at(r.floor));
      if (!r.from.empty()) {
        std::printf("    logits worst, exact before side s (2i: layer i's attention, 2i+1 its MLP):");
        for (size_t i = 0; i < r.from.size(); ++i) std::printf(" [%zu] %.3g", i, worst(r.from[i]));
        std::printf("\n");
      }
      if (verbose() || worst(r.propagated.logits) > 1e-5) {
        std::printf("    layer kind        attn local (pos)   MLP local (pos)   p carried   h carried (pos)\n");
        for (size_t l = 0; l < L; ++l)
          std::printf("    %2zu    %-10s  %9.3g (%2zu)     %9.3g (%2zu)    %9.3g   %9.3g (%2zu)\n", l,
                      layer_name(c, l).c_str(), worst(r.local.p[l]), worst_at(r.local.p[l]), worst(r.local.h[l]),
                      worst_at(r.local.h[l]), worst(r.propagated.p[l]), worst(r.propagated.h[l]),
                      worst_at(r.propagated.h[l]));
      }
      if (kinds.empty())
        for (size_t l = 0; l < L; ++l) kinds += layer_name(c, l) + (l + 1 < L ? " " : "");
    }
    std::printf("-- %s:%zu over %zu seeds: logits worst %.3g, median of per-seed worst %.3g, seeds above 1e-5: %zu; "
                "tail alone worst %.3g; local runs with the same experts (the local figures): %zu\n",
                shape.preset.c_str(), shape.positions, case_worst.size(), worst(case_worst), median(case_worst),
                static_cast<size_t>(std::count_if(case_worst.begin(), case_worst.end(), [](double e) { return e > 1e-5; })),
                worst(case_local_tail), held);
    if (o.floor)
      std::printf("   floor (p, h rounded to fp32 in the reference): worst %.3g, median %.3g, seeds above 1e-5: %zu\n",
                  worst(floor_worst), median(floor_worst),
                  static_cast<size_t>(std::count_if(floor_worst.begin(), floor_worst.end(), [](double e) { return e > 1e-5; })));
    if (!from.empty()) {
      std::printf("   logits worst / median, exact before side s (2i: layer i's attention, 2i+1 its MLP):\n");
      for (size_t i = 0; i < from.size(); ++i)
        std::printf("     [%2zu] %-16s %9.3g / %9.3g\n", i,
                    i == from.size() - 1 ? "(tail alone)" : (kinds_of(kinds, i / 2) + (i % 2 ? " MLP" : " attn")).c_str(),
                    worst(from[i]), median(from[i]));
      std::printf("\n");
    }
    std::printf("   layer kind        attn local worst/median   MLP local worst/median   h carried worst/median\n");
    std::stringstream ks(kinds);
    for (size_t l = 0; l < attn_local.size(); ++l) {
      std::string k;
      ks >> k;
      std::printf("   %2zu    %-10s  %9.3g / %9.3g      %9.3g / %9.3g     %9.3g / %9.3g\n", l, k.c_str(),
                  worst(attn_local[l]), median(attn_local[l]), worst(mlp_local[l]), median(mlp_local[l]),
                  worst(h_prop[l]), median(h_prop[l]));
    }
  }
}

}  // namespace

// Enabled and cheap (one tiny checkpoint, 16 positions: ~0.3 s): the local
// run above, as a check. Each layer's attention side (AttnRes, norm,
// attention) and MLP side (AttnRes, norm, MLP), and the tail, computed from
// exact inputs, stays within a bound of the reference at every position.
// The bounds are what 324 held-out cases (DISABLED_K3Margin.PerLayerErrors:
// seeds 101-200 at tiny:16, tiny:64, small:32, 101-124 at small:128) gave,
// with a margin of 3 to 7: MLA side at most 1.5e-7 (the expanded, pre-latent
// form alike), MLP side 6.4e-7, KDA side 3.5e-6 (at a block start, where p
// is the attention output alone), tail 3.2e-7. The logits can exceed 1e-5 only through the depth,
// which ForwardVsReference measures; a wrong op shows here at its layer,
// however little the layers after it carry it to the logits (the latent
// cache's norm without its eps: MLA sides 1.7e-6 here, a logits error under
// 1e-5 on two of ForwardVsReference's three seeds).
TEST(K3LayerExactness, EveryLayerFromExactInputsWithinItsBound) {
  constexpr double kMlaSide = 1e-6, kKdaSide = 1e-5, kMlpSide = 2e-6, kTail = 1e-6;
  std::unique_ptr<Model> m = make_model("tiny", 1);
  const K3Config& c = m->ckpt.config;
  const std::vector<uint32_t> tokens = test::random_tokens(1, 16, static_cast<uint32_t>(c.vocab_size));
  const CaseErrors r = run_case(*m, tokens);
  ASSERT_TRUE(r.routes_held) << "the local run chose other experts than the fast one";
  for (size_t l = 0; l < r.local.p.size(); ++l) {
    const double attention = c.layer_kinds[l] == LayerKind::MLA ? kMlaSide : kKdaSide;
    for (size_t t = 0; t < tokens.size(); ++t) {
      EXPECT_LE(r.local.p[l][t], attention) << "layer " << l << " (" << layer_name(c, l) << ") attention side, position " << t;
      EXPECT_LE(r.local.h[l][t], kMlpSide) << "layer " << l << " (" << layer_name(c, l) << ") MLP side, position " << t;
    }
    std::printf("[ layers ] %2zu %-10s attention side %.3g, MLP side %.3g\n", l, layer_name(c, l).c_str(),
                worst(r.local.p[l]), worst(r.local.h[l]));
  }
  for (size_t t = 0; t < tokens.size(); ++t) EXPECT_LE(r.local.logits[t], kTail) << "tail, position " << t;
  std::printf("[ layers ] tail %.3g\n", worst(r.local.logits));
}

TEST(DISABLED_K3Margin, PerLayerErrors) {
  Options o;
  o.floor = true;
  study(o, "fast path as built");
}

TEST(DISABLED_K3Margin, WhereTheLogitsErrorStarts) {
  Options o;
  o.from_side = true;
  study(o, "fast path from side s on, exact before");
}

// DELTAFIN_MARGIN_EXACT: the ops to compute exactly, comma-separated
// (ProbeBackend::exact's names; default all).
TEST(DISABLED_K3Margin, PerLayerErrorsWithExactOps) {
  const char* env = std::getenv("DELTAFIN_MARGIN_EXACT");
  const std::string list = env ? env : "all";
  Options o;
  std::stringstream ss(list);
  std::string op;
  while (std::getline(ss, op, ',')) o.exact.insert(op);
  o.floor = true;
  study(o, ("exact (in double, rounded once): " + list).c_str());
}

}  // namespace k3_margin_test
}  // namespace deltafin
