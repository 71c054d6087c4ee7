// The routed-experts block (model/common/routed_experts.h) over the CPU
// backend and a fake expert source whose records the test builds by hand:
// its output against a float64 reference written here, bit identity however
// the source groups and orders its hand-overs and on any thread count, the
// combine's fixed order, the `first` row offset, cancellation, bad input,
// and the backend's buffer pool on a repeated call.
#include "model/common/routed_experts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cpu_backend.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace deltafin {
namespace {

// A small deterministic generator (an LCG; the top bits are the output).
class Lcg {
public:
  explicit Lcg(uint64_t seed) : s_(seed * 2862933555777941757ull + 3037000493ull) {}
  uint32_t next() {
    s_ = s_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s_ >> 33);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() % 65536) / 65536.0f; }

private:
  uint64_t s_;
};

// ---- Expert records, built and decoded here (not by the kernels) ----------

// One matrix [rows, cols] as the record stores it and as the reference reads
// it (decoded exactly, in double).
struct Matrix {
  size_t rows = 0, cols = 0;
  std::vector<uint8_t> values, scales;  // scales: MXFP4 only
  std::vector<double> decoded;          // [rows * cols]
  double at(size_t r, size_t c) const { return decoded[r * cols + c]; }
};

// BF16: the upper 16 bits of an fp32 in [-1, 1) (truncated: any BF16 value
// is a valid weight); decoded as those bits shifted back.
Matrix bf16_matrix(size_t rows, size_t cols, Lcg& rng) {
  Matrix m{rows, cols, std::vector<uint8_t>(rows * cols * 2), {}, std::vector<double>(rows * cols)};
  for (size_t i = 0; i < rows * cols; ++i) {
    const float f = rng.uniform(-1.0f, 1.0f);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const uint16_t b = static_cast<uint16_t>(bits >> 16);
    m.values[2 * i] = static_cast<uint8_t>(b & 0xff);
    m.values[2 * i + 1] = static_cast<uint8_t>(b >> 8);
    const uint32_t back = static_cast<uint32_t>(b) << 16;
    float w;
    std::memcpy(&w, &back, 4);
    m.decoded[i] = w;
  }
  return m;
}

// MXFP4 (k3-model.md §4): e2m1 nibbles, low nibble = even column, bit 3 the
// sign; one e8m0 scale byte per 32 columns of a row (2^(s - 127)). Scales
// 125 ... 127 keep the weights within +-6.
Matrix mxfp4_matrix(size_t rows, size_t cols, Lcg& rng) {
  static const double kMagnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  Matrix m{rows, cols, std::vector<uint8_t>(rows * cols / 2, 0), std::vector<uint8_t>(rows * cols / 32),
           std::vector<double>(rows * cols)};
  for (uint8_t& s : m.scales) s = static_cast<uint8_t>(125 + rng.next() % 3);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const uint8_t nibble = static_cast<uint8_t>(rng.next() % 16);
      const size_t i = r * cols + c;
      m.values[i / 2] |= static_cast<uint8_t>(c % 2 == 0 ? nibble : nibble << 4);
      const double scale = std::ldexp(1.0, static_cast<int>(m.scales[r * cols / 32 + c / 32]) - 127);
      m.decoded[i] = ((nibble & 8) ? -1.0 : 1.0) * kMagnitude[nibble & 7] * scale;
    }
  return m;
}

// One expert: its three matrices and its record, laid out down, gate, up
// (then the scales, up's before gate's), so that a block using the wrong
// offset reads the wrong matrix.
struct Expert {
  Matrix gate, up, down;
  std::vector<uint8_t> record;
};

void append(std::vector<uint8_t>& record, const std::vector<uint8_t>& bytes, uint64_t& offset) {
  offset = record.size();
  record.insert(record.end(), bytes.begin(), bytes.end());
}

// The layout and `count` experts of random weights of `type`.
struct ExpertSet {
  ExpertMlp mlp;
  std::vector<Expert> experts;
};

ExpertSet make_experts(WeightType type, size_t in, size_t mid, size_t out, Gate fn, size_t count, uint64_t seed) {
  Lcg rng(seed);
  ExpertSet set;
  set.mlp.type = type;
  set.mlp.in = in, set.mlp.mid = mid, set.mlp.out = out;
  set.mlp.fn = fn;
  auto matrix = [&](size_t rows, size_t cols) {
    return type == WeightType::MXFP4 ? mxfp4_matrix(rows, cols, rng) : bf16_matrix(rows, cols, rng);
  };
  for (size_t e = 0; e < count; ++e) {
    Expert x{matrix(mid, in), matrix(mid, in), matrix(out, mid), {}};
    ExpertMlp at;  // this record's offsets: the same for every expert
    append(x.record, x.down.values, at.down);
    append(x.record, x.gate.values, at.gate);
    append(x.record, x.up.values, at.up);
    if (type == WeightType::MXFP4) {
      append(x.record, x.up.scales, at.up_scales);
      append(x.record, x.gate.scales, at.gate_scales);
      append(x.record, x.down.scales, at.down_scales);
    }
    set.mlp.gate = at.gate, set.mlp.up = at.up, set.mlp.down = at.down;
    set.mlp.gate_scales = at.gate_scales, set.mlp.up_scales = at.up_scales, set.mlp.down_scales = at.down_scales;
    set.experts.push_back(std::move(x));
  }
  return set;
}

// ---- The float64 reference ------------------------------------------------

// The activation (g, u) -> h split as a * b (silu(g) * u; SiTU's t3 * t5),
// so the tolerance can bound each factor's error.
void activation(const Gate& fn, double g, double u, double& a, double& b) {
  const double sig = 1.0 / (1.0 + std::exp(-g));
  if (fn.kind == Gate::Kind::SiluMul) {
    a = g * sig, b = u;
    return;
  }
  a = std::tanh(g / fn.beta) * fn.beta * sig;
  b = std::tanh(u / fn.beta_lin) * fn.beta_lin;
}

// out[c] = sum_i w_i * down_i(a * b) of row x, and a bound on fp32's error
// there: every magnitude the products and activations went through.
void reference_row(const ExpertSet& set, const Route& route, const float* x, std::vector<double>& out,
                   std::vector<double>& bound) {
  const ExpertMlp& m = set.mlp;
  out.assign(m.out, 0.0);
  bound.assign(m.out, 0.0);
  for (size_t i = 0; i < route.experts.size(); ++i) {
    const Expert& e = set.experts[static_cast<size_t>(route.experts[i])];
    const double w = route.weights[i];
    std::vector<double> h(m.mid), hmag(m.mid);
    for (size_t r = 0; r < m.mid; ++r) {
      double g = 0, u = 0, gmag = 0, umag = 0;
      for (size_t c = 0; c < m.in; ++c) {
        g += e.gate.at(r, c) * x[c];
        u += e.up.at(r, c) * x[c];
        gmag += std::fabs(e.gate.at(r, c) * x[c]);
        umag += std::fabs(e.up.at(r, c) * x[c]);
      }
      double a, b;
      activation(m.fn, g, u, a, b);
      h[r] = a * b;
      // Each factor's derivative is at most 1 + beta / 4 (2 here).
      hmag[r] = (std::fabs(a) + 2 * gmag) * (std::fabs(b) + 2 * umag);
    }
    for (size_t c = 0; c < m.out; ++c) {
      double y = 0, ymag = 0;
      for (size_t r = 0; r < m.mid; ++r) {
        y += e.down.at(c, r) * h[r];
        ymag += std::fabs(e.down.at(c, r)) * hmag[r];
      }
      out[c] += w * y;
      bound[c] += std::fabs(w) * ymag;
    }
  }
}

// ---- A fake expert source ---------------------------------------------------

// How the source hands the requested experts over.
enum class Handover { AllAtOnce, OneAtATimeReversed, PairsReversed, OddsThenEvens };
const char* handover_name(Handover h) {
  static const char* names[] = {"all at once", "one at a time, reversed", "pairs, reversed", "odds, then evens"};
  return names[static_cast<int>(h)];
}

class FakeSource : public ExpertSource {
public:
  // records[e] is expert e's record (several ids may share one).
  explicit FakeSource(std::vector<const std::vector<uint8_t>*> records) : records_(std::move(records)) {}

  ExpertHandle get(int64_t layer, int64_t expert) override {
    ++gets;
    last_layer = layer;
    return {records_.at(static_cast<size_t>(expert))->data(), nullptr};
  }

  void for_each_ready_group(int64_t layer, std::span<const int64_t> experts,
                            const std::function<void(std::span<const ReadyExpert>)>& use) override {
    ++requests;
    requested.assign(experts.begin(), experts.end());
    if (handover == Handover::AllAtOnce) {
      ExpertSource::for_each_ready_group(layer, experts, [&](std::span<const ReadyExpert> g) {
        handed += g.size();
        use(g);
      });
      return;
    }
    std::vector<std::vector<size_t>> groups;  // indices into `experts`
    const size_t n = experts.size();
    if (handover == Handover::OneAtATimeReversed)
      for (size_t i = n; i-- > 0;) groups.push_back({i});
    if (handover == Handover::PairsReversed)
      for (size_t i = n; i > 0; i = i >= 2 ? i - 2 : 0) groups.push_back(i >= 2 ? std::vector<size_t>{i - 1, i - 2} : std::vector<size_t>{0});
    if (handover == Handover::OddsThenEvens) {
      groups.emplace_back();
      for (size_t i = 1; i < n; i += 2) groups.back().push_back(i);
      for (size_t i = 0; i < n; i += 2) groups.push_back({i});
    }
    for (const std::vector<size_t>& g : groups) {
      std::vector<ReadyExpert> ready;
      for (size_t i : g) ready.push_back({i, get(layer, experts[i]).data});
      handed += ready.size();
      use(ready);
    }
  }

  Handover handover = Handover::AllAtOnce;
  int gets = 0, requests = 0;
  size_t handed = 0;
  int64_t last_layer = -1;
  std::vector<int64_t> requested;

private:
  std::vector<const std::vector<uint8_t>*> records_;
};

std::vector<const std::vector<uint8_t>*> records_of(const ExpertSet& set) {
  std::vector<const std::vector<uint8_t>*> r;
  for (const Expert& e : set.experts) r.push_back(&e.record);
  return r;
}

// ---- Inputs and helpers -----------------------------------------------------

// n routes of k distinct experts below `experts`, weights in [0.05, 0.5).
std::vector<Route> random_routes(size_t n, size_t k, size_t experts, uint64_t seed) {
  Lcg rng(seed);
  std::vector<Route> routes(n);
  for (Route& r : routes)
    while (r.experts.size() < k) {
      const int64_t e = rng.next() % experts;
      if (std::find(r.experts.begin(), r.experts.end(), e) != r.experts.end()) continue;
      r.experts.push_back(e);
      r.weights.push_back(rng.uniform(0.05f, 0.5f));
    }
  return routes;
}

std::vector<float> random_rows(size_t rows, size_t width, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> v(rows * width);
  for (float& f : v) f = rng.uniform(-0.25f, 0.25f);
  return v;
}

Act upload(Backend& be, const std::vector<float>& host, size_t width) {
  Act a = be.act(host.size() / width, width);
  be.write(a, 0, host);
  return a;
}

std::vector<float> download(Backend& be, const Act& a) {
  std::vector<float> v(a.size());
  be.read(a, 0, v);
  return v;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

// Fills `count` buffers of the backend's pool with NaN and gives them back,
// so that a result the block forgot to write is NaN, not the value a
// previous run left in a reused buffer.
void poison(Backend& be, size_t count, size_t floats) {
  std::vector<Act> held;
  const std::vector<float> nan(floats, std::numeric_limits<float>::quiet_NaN());
  for (size_t i = 0; i < count; ++i) {
    held.push_back(be.act(1, floats));
    be.write(held.back(), 0, nan);
  }
}

// One run of a fresh block: out for rows first ... of `in`.
std::vector<float> run_block(Backend& be, ExpertSource& source, const ExpertSet& set, size_t num_experts,
                             const std::vector<float>& in, size_t first, const std::vector<Route>& routes) {
  RoutedExperts block(be, source, set.mlp, num_experts);
  Act x = upload(be, in, set.mlp.in), out = be.act(routes.size(), set.mlp.out);
  EXPECT_TRUE(block.run(3, x, first, routes, out));
  return download(be, out);
}

// Checks out (rows of mlp.out) against the float64 reference within 1e-4 of
// the error bound's magnitudes (fp32 keeps ~1e-6 of them).
void expect_near_reference(const ExpertSet& set, const std::vector<float>& in, size_t first,
                           const std::vector<Route>& routes, const std::vector<float>& out) {
  std::vector<double> want, bound;
  for (size_t t = 0; t < routes.size(); ++t) {
    reference_row(set, routes[t], in.data() + (first + t) * set.mlp.in, want, bound);
    for (size_t c = 0; c < set.mlp.out; ++c)
      ASSERT_NEAR(out[t * set.mlp.out + c], want[c], 1e-4 * bound[c] + 1e-7) << "row " << t << " column " << c;
  }
}

constexpr size_t kExperts = 8;
const Gate kSitu = Gate::situ(4.0f, 8.0f);

ExpertSet bf16_set() { return make_experts(WeightType::BF16, 32, 64, 48, Gate::silu_mul(), kExperts, 11); }
ExpertSet mxfp4_set() { return make_experts(WeightType::MXFP4, 64, 32, 32, kSitu, kExperts, 12); }

// ---- (a) against the reference ----------------------------------------------

TEST(RoutedExperts, Bf16SiluMatchesTheFloat64Reference) {
  const ExpertSet set = bf16_set();
  FakeSource source(records_of(set));
  CpuBackend be(nullptr);
  const std::vector<Route> routes = random_routes(5, 3, kExperts, 1);
  const std::vector<float> in = random_rows(5, set.mlp.in, 2);
  const std::vector<float> out = run_block(be, source, set, kExperts, in, 0, routes);
  expect_near_reference(set, in, 0, routes, out);
  // The source was asked once, for the layer given, for each expert used
  // (ascending), and handed each over once.
  std::vector<int64_t> used;
  for (const Route& r : routes) used.insert(used.end(), r.experts.begin(), r.experts.end());
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  EXPECT_EQ(source.requests, 1);
  EXPECT_EQ(source.last_layer, 3);
  EXPECT_EQ(source.requested, used);
  EXPECT_EQ(source.handed, used.size());
}

TEST(RoutedExperts, Mxfp4SituMatchesTheFloat64Reference) {
  const ExpertSet set = mxfp4_set();
  FakeSource source(records_of(set));
  CpuBackend be(nullptr);
  const std::vector<Route> routes = random_routes(6, 2, kExperts, 3);
  const std::vector<float> in = random_rows(6, set.mlp.in, 4);
  expect_near_reference(set, in, 0, routes, run_block(be, source, set, kExperts, in, 0, routes));
}

// One row, one expert of weight 1: a decoding step's smallest case.
TEST(RoutedExperts, OneRowOneExpert) {
  const ExpertSet set = bf16_set();
  FakeSource source(records_of(set));
  CpuBackend be(nullptr);
  const std::vector<Route> routes = {Route{{5}, {1.0f}}};
  const std::vector<float> in = random_rows(1, set.mlp.in, 5);
  expect_near_reference(set, in, 0, routes, run_block(be, source, set, kExperts, in, 0, routes));
}

// ---- (b) bit identity whatever the hand-over and the threads ----------------

TEST(RoutedExperts, BitsDoNotDependOnHandoverOrderGroupingOrThreads) {
  for (const ExpertSet& set : {bf16_set(), mxfp4_set()}) {
    SCOPED_TRACE(set.mlp.type == WeightType::MXFP4 ? "MXFP4" : "BF16");
    // 12 rows x 3 slots over 8 experts: unequal groups, so the CPU backend
    // spreads some groups one expert per thread and splits others by rows.
    const std::vector<Route> routes = random_routes(12, 3, kExperts, 6);
    const std::vector<float> in = random_rows(12, set.mlp.in, 7);
    FakeSource source(records_of(set));
    CpuBackend serial(nullptr);
    const std::vector<float> want = run_block(serial, source, set, kExperts, in, 0, routes);
    expect_near_reference(set, in, 0, routes, want);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (Handover h : {Handover::AllAtOnce, Handover::OneAtATimeReversed, Handover::PairsReversed,
                         Handover::OddsThenEvens}) {
        SCOPED_TRACE(testing::Message() << threads << " threads, hand-over " << handover_name(h));
        CpuBackend be(&pool);
        poison(be, 32, 12 * 3 * 64);  // more buffers than a run takes, each as large as its largest
        FakeSource s(records_of(set));
        s.handover = h;
        EXPECT_EQ(bits(run_block(be, s, set, kExperts, in, 0, routes)), bits(want));
        EXPECT_EQ(s.handed, s.requested.size());
      }
    }
  }
}

// The combine adds slot after slot in route order, each product rounded,
// from 0 (backend.h's weighted_sum). Three ids share one record, so each
// slot's expert output is the same y; with weights 1, 2^30, -2^30:
//   ((0 + y) + 2^30 y) - 2^30 y = 0 exactly, as y is below half an ulp of
// 2^30 y; in reverse order the big terms cancel first and y is left, and a
// pairwise or fused sum differs again.
TEST(RoutedExperts, CombineAddsTheSlotsInRouteOrder) {
  const ExpertSet set = bf16_set();
  std::vector<const std::vector<uint8_t>*> records = records_of(set);
  records[1] = records[4] = records[6] = &set.experts[2].record;
  const float big = std::ldexp(1.0f, 30);
  const std::vector<Route> routes = {Route{{4, 1, 6}, {1.0f, big, -big}}, Route{{6, 4, 1}, {1.0f, big, -big}}};
  const std::vector<float> in = random_rows(2, set.mlp.in, 8);
  FakeSource source(records);
  CpuBackend be(nullptr);
  const std::vector<float> out = run_block(be, source, set, kExperts, in, 0, routes);
  // y itself is not zero (else the case proves nothing): one slot of weight 1.
  const std::vector<float> y = run_block(be, source, set, kExperts, in, 0, {Route{{2}, {1.0f}}, Route{{2}, {1.0f}}});
  size_t nonzero = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i], 0.0f) << "element " << i << " (y = " << y[i] << ")";
    nonzero += y[i] != 0.0f;
  }
  EXPECT_EQ(nonzero, y.size());
}

// ---- (c) rows from `first` --------------------------------------------------

TEST(RoutedExperts, RoutesApplyToRowsFromFirst) {
  const ExpertSet set = bf16_set();
  FakeSource source(records_of(set));
  CpuBackend be(nullptr);
  const std::vector<Route> routes = random_routes(4, 2, kExperts, 9);
  const std::vector<float> in = random_rows(8, set.mlp.in, 10);
  const std::vector<float> out = run_block(be, source, set, kExperts, in, 3, routes);
  expect_near_reference(set, in, 3, routes, out);
  // The same bits as the block given only rows 3 ... 6.
  const std::vector<float> rows(in.begin() + 3 * set.mlp.in, in.begin() + 7 * set.mlp.in);
  EXPECT_EQ(bits(run_block(be, source, set, kExperts, rows, 0, routes)), bits(out));
}

// ---- (d) cancellation -------------------------------------------------------

// A backend that counts the expert MLPs it is asked to run (gated_matmul: one
// per expert computed) and otherwise is the CPU backend: it hands out Acts of
// its own fp32 storage, which the CPU backend's ops address as theirs.
class CountingBackend final : public Backend {
public:
  const char* name() const override { return "counting"; }
  void write(Act& d, size_t r, std::span<const float> h) override { cpu_.write(d, r, h); }
  void read(const Act& s, size_t r, std::span<float> h) override { cpu_.read(s, r, h); }
  void copy(const Act& s, Act& d) override { cpu_.copy(s, d); }
  void copy_rows(const Act& s, size_t f, Act& d) override { cpu_.copy_rows(s, f, d); }
  void place_rows(const Act& s, size_t f, Act& d) override { cpu_.place_rows(s, f, d); }
  void copy_cols(const Act& s, size_t sc, size_t n, Act& d, size_t dc) override { cpu_.copy_cols(s, sc, n, d, dc); }
  void round_bf16(const Act& s, Act& d, size_t dc) override { cpu_.round_bf16(s, d, dc); }
  void embed(const WeightView& t, std::span<const uint32_t> ids, Act& o) override { cpu_.embed(t, ids, o); }
  void matmul(const WeightView& w, const Act& x, Act& y) override { cpu_.matmul(w, x, y); }
  void gated_matmul(const WeightView& g, const WeightView& u, const Act& x, Gate fn, Act& h) override {
    ++expert_mlps;
    cpu_.gated_matmul(g, u, x, fn, h);
  }
  void rmsnorm(const Act& x, std::span<const float> w, float eps, Act& y) override { cpu_.rmsnorm(x, w, eps, y); }
  void rmsnorm_heads(Act& x, std::span<const float> w, size_t hd, float eps) override { cpu_.rmsnorm_heads(x, w, hd, eps); }
  void rope_half(Act& x, size_t hd, const Act& c, const Act& s) override { cpu_.rope_half(x, hd, c, s); }
  void rope_pairs(Act& x, size_t hd, const Act& c, const Act& s) override { cpu_.rope_pairs(x, hd, c, s); }
  void add(Act& x, const Act& d) override { cpu_.add(x, d); }
  void mul_sigmoid(Act& x, const Act& g) override { cpu_.mul_sigmoid(x, g); }
  void depth_mix(std::span<const Act* const> v, std::span<const float> s, float eps, Act& o) override {
    cpu_.depth_mix(v, s, eps, o);
  }
  void weighted_sum(const Act& y, std::span<const float> w, size_t k, Act& o) override { cpu_.weighted_sum(y, w, k, o); }
  void gather(const Act& s, std::span<const uint32_t> r, Act& d) override { cpu_.gather(s, r, d); }
  void scatter(const Act& s, std::span<const uint32_t> r, Act& d) override { cpu_.scatter(s, r, d); }
  void kv_store(const Act& k, const Act& v, KvLayer c, int64_t s) override { cpu_.kv_store(k, v, c, s); }
  bool attention_gqa(const Act& q, KvLayer c, const GqaShape& s, Act& o, const std::function<bool()>& stop) override {
    return cpu_.attention_gqa(q, c, s, o, stop);
  }
  void latent_store(const Act& ckv, std::span<const float> w, float eps, LatentLayer c, int64_t s) override {
    cpu_.latent_store(ckv, w, eps, c, s);
  }
  bool attention_latent(const Act& q, LatentLayer c, const MlaShape& s, Act& u, const std::function<bool()>& stop) override {
    return cpu_.attention_latent(q, c, s, u, stop);
  }
  void kda_recurrence(const Act& q, const Act& k, const Act& v, const Act& g, const Act& r, const Act& b,
                      const KdaParams& p, KdaLayerState st, const KdaTrace* tr, Act& o) override {
    cpu_.kda_recurrence(q, k, v, g, r, b, p, st, tr, o);
  }
  void kda_replay(const KdaParams& p, KdaLayerState st, const KdaSteps& steps, size_t rows) override {
    cpu_.kda_replay(p, st, steps, rows);
  }
  void run_experts(std::span<const size_t> rows, const std::function<void(size_t)>& compute) override {
    cpu_.run_experts(rows, compute);
  }

  std::atomic<int> expert_mlps{0};

private:
  Slot acquire(size_t floats) override {
    std::lock_guard<std::mutex> lock(mutex_);  // Backend::act may be called from the experts' threads
    slots_.push_back(std::make_unique<std::vector<float>>(floats));
    return {static_cast<uint32_t>(slots_.size() - 1), slots_.back()->data()};
  }
  void release(uint32_t) override {}  // kept until the backend dies (a test's few buffers)

  CpuBackend cpu_{nullptr};
  std::mutex mutex_;
  std::vector<std::unique_ptr<std::vector<float>>> slots_;
};

TEST(RoutedExperts, CancelledStopsComputingButTakesEveryExpert) {
  const ExpertSet set = bf16_set();
  const std::vector<Route> routes = random_routes(6, 2, kExperts, 13);
  const std::vector<float> in = random_rows(6, set.mlp.in, 14);
  CountingBackend be;
  FakeSource source(records_of(set));
  source.handover = Handover::OneAtATimeReversed;
  RoutedExperts block(be, source, set.mlp, kExperts);
  Act x = upload(be, in, set.mlp.in), out = be.act(routes.size(), set.mlp.out);

  // Says yes at its third question: two experts computed, none after, and
  // not asked again once it has said yes.
  int asked = 0;
  EXPECT_FALSE(block.run(0, x, 0, routes, out, [&] { return ++asked >= 3; }));
  ASSERT_GE(source.requested.size(), 4u);
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(be.expert_mlps.load(), 2);
  EXPECT_EQ(source.handed, source.requested.size());

  // A callback that never says yes: every expert computed, the right values,
  // so the cancelled call left nothing behind.
  be.expert_mlps = 0;
  asked = 0;
  source.handed = 0;
  EXPECT_TRUE(block.run(0, x, 0, routes, out, [&] { return ++asked < 0; }));
  EXPECT_EQ(be.expert_mlps.load(), static_cast<int>(source.requested.size()));
  EXPECT_EQ(asked, static_cast<int>(source.requested.size()));  // once per group, one expert each
  expect_near_reference(set, in, 0, routes, download(be, out));
}

// ---- (e) bad input ----------------------------------------------------------

TEST(RoutedExperts, RefusesBadInputNamingIt) {
  const ExpertSet set = bf16_set();
  FakeSource source(records_of(set));
  CpuBackend be(nullptr);
  RoutedExperts block(be, source, set.mlp, kExperts);
  const std::vector<float> in = random_rows(3, set.mlp.in, 15);
  Act x = upload(be, in, set.mlp.in), out = be.act(2, set.mlp.out);
  std::vector<Route> routes = {Route{{0, 1}, {0.5f, 0.5f}}, Route{{2, 8}, {0.5f, 0.5f}}};
  EXPECT_FAILS_WITH(block.run(0, x, 0, routes, out), "routed experts", "expert 8 of 8");
  routes[1].experts[1] = -1;
  EXPECT_FAILS_WITH(block.run(0, x, 0, routes, out), "routed experts", "expert -1 of 8");
  routes[1] = Route{{2, 3, 4}, {0.2f, 0.3f, 0.5f}};
  EXPECT_FAILS_WITH(block.run(0, x, 0, routes, out), "routed experts", "routes of 2 and 3 experts");
  routes[1] = Route{{2, 3}, {0.5f, 0.5f}};
  // out of 3 rows for 2 routes, out too narrow, in too narrow, rows past in's end.
  Act out3 = be.act(3, set.mlp.out), narrow = be.act(2, set.mlp.out - 1), x_narrow = be.act(3, set.mlp.in - 1);
  EXPECT_FAILS_WITH(block.run(0, x, 0, routes, out3), "routed experts", "into [3, 48]", "for 2 routes");
  EXPECT_FAILS_WITH(block.run(0, x, 0, routes, narrow), "routed experts", "into [2, 47]", "to 48");
  EXPECT_FAILS_WITH(block.run(0, x_narrow, 0, routes, out), "routed experts", "rows [3, 31]", "from 32");
  EXPECT_FAILS_WITH(block.run(0, x, 2, routes, out), "routed experts", "rows [3, 32] from 2");
  EXPECT_EQ(source.requests, 0);  // refused before the source was asked
}

// A refused call must leave the block as it was: the model that threw
// serves the next request with the same block. Here the second route is
// refused after the first one's experts were counted.
TEST(RoutedExperts, ARefusedCallLeavesTheNextOneExact) {
  const ExpertSet set = bf16_set();
  const std::vector<Route> good = {Route{{0, 1}, {0.75f, 0.25f}}, Route{{1, 5}, {0.5f, 0.5f}}};
  const std::vector<float> in = random_rows(2, set.mlp.in, 18);
  CpuBackend be(nullptr);
  FakeSource fresh_source(records_of(set));
  const std::vector<float> want = run_block(be, fresh_source, set, kExperts, in, 0, good);

  for (const Route& bad : {Route{{3, 8}, {0.5f, 0.5f}}, Route{{3, 4, 6}, {0.2f, 0.3f, 0.5f}}}) {
    SCOPED_TRACE(testing::Message() << "refused: a route of " << bad.experts.size() << " ending in expert "
                                    << bad.experts.back());
    FakeSource source(records_of(set));
    RoutedExperts block(be, source, set.mlp, kExperts);
    Act x = upload(be, in, set.mlp.in), out = be.act(2, set.mlp.out);
    const std::vector<Route> refused = {Route{{2, 7}, {0.5f, 0.5f}}, bad};
    EXPECT_THROW(block.run(0, x, 0, refused, out), Error);
    try {
      ASSERT_TRUE(block.run(0, x, 0, good, out));
    } catch (const Error& e) {
      ADD_FAILURE() << "the next call threw: " << e.what();
      continue;
    }
    EXPECT_EQ(source.requested, (std::vector<int64_t>{0, 1, 5}));  // not 2 and 7 of the refused call
    EXPECT_EQ(bits(download(be, out)), bits(want));
  }
}

// A route's weights pair with its experts: a Route with fewer weights than
// experts is bad input, named, not a read past the weights' end.
TEST(RoutedExperts, RefusesARouteWhoseWeightsDoNotMatchItsExperts) {
  const ExpertSet set = bf16_set();
  FakeSource source(records_of(set));
  CpuBackend be(nullptr);
  RoutedExperts block(be, source, set.mlp, kExperts);
  Act x = upload(be, random_rows(2, set.mlp.in, 19), set.mlp.in), out = be.act(2, set.mlp.out);
  const std::vector<Route> routes = {Route{{0, 1}, {0.5f, 0.5f}}, Route{{2, 3}, {1.0f}}};
  EXPECT_FAILS_WITH(block.run(0, x, 0, routes, out), "routed experts", "weights");
}

// ---- (f) the buffer pool on a repeated call ---------------------------------

TEST(RoutedExperts, ARepeatedCallTakesNoNewBuffers) {
  const ExpertSet set = mxfp4_set();
  FakeSource source(records_of(set));
  ThreadPool one(1);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &one}) {
    CpuBackend be(pool);
    RoutedExperts block(be, source, set.mlp, kExperts);
    for (size_t rows : {size_t{1}, size_t{5}}) {
      SCOPED_TRACE(testing::Message() << rows << " rows");
      const std::vector<Route> routes = random_routes(rows, 3, kExperts, 16 + rows);
      Act x = upload(be, random_rows(rows, set.mlp.in, 17), set.mlp.in), out = be.act(rows, set.mlp.out);
      ASSERT_TRUE(block.run(0, x, 0, routes, out));
      const size_t made = be.slots_made();
      EXPECT_GT(made, 2u);  // the run took buffers of its own beside x and out
      for (int again = 0; again < 3; ++again) {
        ASSERT_TRUE(block.run(0, x, 0, routes, out));
        EXPECT_EQ(be.slots_made(), made);
      }
    }
  }
}

}  // namespace
}  // namespace deltafin
