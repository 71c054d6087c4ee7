// The backend-ops test (issue 33; llama.cpp's test-backend-ops, but requiring
// equal bits). Every op of the Backend interface runs on every backend
// configuration (backend_rows(): a new backend is one more row) and, for
// backends that run the CPU kernels, on every ISA path this CPU has, at each
// shape class (T = 1, a small T, a T over the kernels' per-call row limit),
// with widths that are not multiples of a SIMD width where the op allows.
// Each op must give:
// - the bits of the reference configuration (the CPU backend without a pool,
//   scalar path), on every configuration and path (run_everywhere);
// - for T rows the bits of T one-row calls, where rows are independent (the
//   exactness contract of backend.h: a T-row pass equals T one-row passes);
// - its definition: exactly where the op is exact in fp32 (copies, embed,
//   add, RoPE, the weighted sum; the build has -ffp-contract=off, so this
//   file's fp32 expressions round every step), the kernels' canonical bits
//   for the reductions (the contract of backend.h), and a float64 reference
//   written here from the definitions, within a bound derived for each op.
// The bounds are first-order rounding-error bounds (Higham, "Accuracy and
// Stability of Numerical Algorithms", ch. 3-4): with u = 2^-24, a sum computed
// in fp32 by a tree of depth D (each addition or fma rounding once) is
// within gamma(D) * sum |terms| of the exact sum, gamma(D) = D u / (1 - D u).
// The canonical sum (k3-model.md §4.4) has depth ceil(n / 32) + 5: the fma
// steps of one lane, then the five levels of the lane tree.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "backend/select/make_backend.h"
#if DELTAFIN_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif
#include "kernels/kernel_table.h"
#include "kernels/kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/portable_math.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/thread_pool.h"

using namespace deltafin;
using namespace deltafin::test;

namespace {

// ---------------------------------------------------------------------------
// Backend configurations

struct Instance {
  std::unique_ptr<ThreadPool> pool;  // declared first: outlives the backend
  std::unique_ptr<Backend> backend;
  std::function<size_t()> buffers_made;  // buffers the backend's pool has made so far
};

struct BackendRow {
  std::string name;
  bool follows_isa;  // runs the CPU kernels of active_isa(): run once per ISA path
  std::function<Instance()> make;
};

Instance cpu_instance(int threads) {
  Instance in;
  if (threads > 0) in.pool = std::make_unique<ThreadPool>(threads);
  auto cpu = std::make_unique<CpuBackend>(in.pool.get());
  const CpuBackend* raw = cpu.get();
  in.buffers_made = [raw] { return raw->slots_made(); };
  in.backend = std::move(cpu);
  return in;
}

#if DELTAFIN_HAVE_VULKAN
// The first usable Vulkan device (lavapipe on a machine without a GPU), or
// why there is none.
const VulkanDeviceInfo* vulkan_device(std::string* why) {
  static std::string error;
  static const std::optional<VulkanDeviceInfo> device = []() -> std::optional<VulkanDeviceInfo> {
    try {
      return choose_vulkan_device(std::getenv("DELTAFIN_DEVICE") ? std::getenv("DELTAFIN_DEVICE") : "");
    } catch (const std::exception& e) {
      error = e.what();
      return std::nullopt;
    }
  }();
  if (why) *why = error;
  return device ? &*device : nullptr;
}

Instance vulkan_instance() {
  Instance in;
  auto v = std::make_unique<VulkanBackend>(*vulkan_device(nullptr), 0, nullptr);
  const VulkanBackend* raw = v.get();
  in.buffers_made = [raw] { return raw->slots_made(); };
  in.backend = std::move(v);
  return in;
}
#endif

// The Vulkan row, where the build has the backend and the machine a device
// ("vulkan" capability: a CI machine has lavapipe, scripts/install-deps.sh).
void add_vulkan_row(std::vector<BackendRow>& rows) {
#if DELTAFIN_HAVE_VULKAN
  std::string why;
  if (have_capability("vulkan", vulkan_device(&why) != nullptr, why))
    rows.push_back({"vulkan", false, [] { return vulkan_instance(); }});
#else
  have_capability("vulkan", !DELTAFIN_VULKAN_WANTED, "the build found no Vulkan headers or glslc");
  (void)rows;
#endif
}

// Row 0 on the scalar path is the reference configuration. A device backend
// is one more row (follows_isa false: it runs once). Its KvLayer would hold
// device pointers; the tests below fill caches only through kv_store and
// read them only through attention, except KvStore, which reads the host
// memory the CPU backend writes.
const std::vector<BackendRow>& backend_rows() {
  static const std::vector<BackendRow> rows = [] {
    std::vector<BackendRow> r = {
        {"cpu", true, [] { return cpu_instance(0); }},
        {"cpu/2 threads", true, [] { return cpu_instance(2); }},
        {"cpu/3 threads", true, [] { return cpu_instance(3); }},
    };
    add_vulkan_row(r);
    return r;
  }();
  return rows;
}

// fn(instance, label) on every configuration and path.
void for_each_backend(const std::function<void(Instance&, const std::string&)>& fn) {
  for (const BackendRow& row : backend_rows()) {
    Instance inst = row.make();
    const std::vector<Isa> isas = row.follows_isa ? supported_isas() : std::vector<Isa>{active_isa()};
    for (Isa isa : isas) {
      IsaScope scope(isa);
      fn(inst, row.name + " " + isa_name(isa));
    }
  }
}

template <class F>
auto on_reference(F&& fn) {
  IsaScope scope(Isa::Scalar);
  Instance inst = backend_rows()[0].make();
  return fn(*inst.backend);
}

// ---------------------------------------------------------------------------
// Shape classes

// Over the kernels' per-call row limit (matmul splits at kMaxRowsPerCall:
// 256 rows, then 5), over kRowTile and the fused small-T paths, and over
// four of attention's stop blocks (so a stop is asked four times).
constexpr size_t kLongT = 261;
static_assert(kLongT > kernels_detail::kMaxRowsPerCall);
static_assert(kLongT > 4 * Backend::kAttentionStopRows && kLongT <= 5 * Backend::kAttentionStopRows);
constexpr size_t kShapeRows[] = {1, 3, kLongT};

constexpr size_t kWidth = 70;  // not a multiple of 8, 16 or 32: every SIMD path has a tail

// ---------------------------------------------------------------------------
// Comparisons

constexpr double kU = 0x1p-24;  // unit roundoff of fp32
// gamma(D) of the comments.
double rounding_gamma(double depth) { return depth * kU / (1 - depth * kU); }
double canonical_depth(size_t n) { return static_cast<double>((n + 31) / 32 + 5); }

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(want[i]) && differing++ == 0) first = i;
  if (differing == 0) return;
  EXPECT_EQ(bits(got[first]), bits(want[first]))
      << where << ": " << differing << " of " << got.size() << " values differ; the first at " << first << ": "
      << got[first] << " instead of " << want[first];
}

// A float64 reference and the bound the fp32 result must keep to it.
struct Ref {
  std::vector<double> value, bound;
};

void expect_within(const std::vector<float>& got, const Ref& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.value.size()) << what;
  size_t outside = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - ref.value[i]) <= ref.bound[i]) && outside++ == 0) first = i;
  EXPECT_EQ(outside, 0u) << what << ": the first at " << first << ": " << got[first] << " vs float64 "
                         << ref.value[first] << ", bound " << ref.bound[first];
}

// ---------------------------------------------------------------------------
// Host <-> backend

Act upload(Backend& be, const std::vector<float>& host, size_t width, size_t r0, size_t n) {
  Act a = be.act(n, width);
  be.write(a, 0, std::span<const float>(host).subspan(r0 * width, n * width));
  return a;
}

Act upload(Backend& be, const std::vector<float>& host, size_t width) {
  return upload(be, host, width, 0, host.size() / width);
}

std::vector<float> download(Backend& be, const Act& a) {
  std::vector<float> host(a.size());
  be.read(a, 0, host);
  return host;
}

std::vector<float> rows_of(const std::vector<float>& v, size_t width, size_t r0, size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(r0 * width), v.begin() + static_cast<std::ptrdiff_t>((r0 + n) * width)};
}

// ---------------------------------------------------------------------------
// The driver

// One op at one shape. run(be, r0, n) issues the op on rows [r0, r0 + n) of
// the case's inputs and returns those rows of its output, row-major.
struct OpCase {
  std::string what;
  size_t rows = 0;
  bool rows_alone = true;  // each row alone must give the same bits
  std::function<std::vector<float>(Backend&, size_t r0, size_t n)> run;
};

// The rows run alone and compared with the T-row result: all of a small T;
// of kLongT, the first and last and those on each side of the boundaries
// where the kernels split a call (kMaxRowsPerCall) and attention asks its
// stop (kAttentionStopRows). A one-row call with a pool costs a hand-off of
// the threads, and 261 of them per configuration and path cost seconds on
// a loaded 2-core machine for little more.
std::vector<size_t> rows_checked_alone(size_t T) {
  std::vector<size_t> rows;
  if (T <= 8) {
    for (size_t t = 0; t < T; ++t) rows.push_back(t);
    return rows;
  }
  const size_t stop = Backend::kAttentionStopRows, call = kernels_detail::kMaxRowsPerCall;
  for (size_t t : {size_t{0}, size_t{1}, stop - 1, stop, 2 * stop + 1, call - 1, call, T - 1})
    if (t < T && std::find(rows.begin(), rows.end(), t) == rows.end()) rows.push_back(t);
  return rows;
}

// The reference configuration's output, after checking that every
// configuration and path gives its bits, for all rows and row by row.
std::vector<float> run_everywhere(const OpCase& op) {
  const std::vector<float> ref = on_reference([&](Backend& be) { return op.run(be, 0, op.rows); });
  for_each_backend([&](Instance& inst, const std::string& where) {
    Backend& be = *inst.backend;
    expect_same_bits(op.run(be, 0, op.rows), ref, op.what + " on " + where);
    if (!op.rows_alone || op.rows == 1) return;
    const size_t width = ref.size() / op.rows;
    for (size_t t : rows_checked_alone(op.rows))
      expect_same_bits(op.run(be, t, 1), rows_of(ref, width, t, 1),
                       op.what + " row " + std::to_string(t) + " alone on " + where);
  });
  return ref;
}

std::string at_t(const std::string& what, size_t T) { return what + " T=" + std::to_string(T); }

// ---------------------------------------------------------------------------
// float64 references, from the definitions

// y = W x per row, from the exact weight decode (weight_at). The canonical
// sum's bound, plus one rounding for Int8Row's scale multiply after the dot.
Ref ref_matmul(const WeightView& w, const std::vector<float>& x, size_t T) {
  const double depth = canonical_depth(w.cols) + (w.type == WeightType::Int8Row ? 1 : 0);
  Ref ref;
  for (size_t t = 0; t < T; ++t)
    for (size_t r = 0; r < w.rows; ++r) {
      double acc = 0, mag = 0;
      for (size_t c = 0; c < w.cols; ++c) {
        const double p = static_cast<double>(weight_at(w, r, c)) * x[t * w.cols + c];
        acc += p;
        mag += std::fabs(p);
      }
      ref.value.push_back(acc);
      ref.bound.push_back(rounding_gamma(depth) * mag);
    }
  return ref;
}

double sigmoid64(double g) { return 1 / (1 + std::exp(-g)); }

// h = gate_fn(g, u) from the float64 products g, u (bounds bg, bu). An error
// e in g moves silu(g) by at most 1.1 e (|silu'| <= 1.0998) and
// SiTU's A(g) = beta tanh(g / beta) sigmoid(g) by (1 + beta / 4) e
// (|A'| <= sech^2 sigmoid + beta tanh sigmoid (1 - sigmoid)); an error in u
// moves u by itself and B(u) = beta_lin tanh(u / beta_lin) by at most as
// much. On top, the fp32 evaluation: SiLU is 5 rounded steps (expf, +, /,
// x, x u), SiTU 11 (two tanhf, expf, two divides, five multiplies, the +),
// each within 2 u relative (expf, tanhf: portable_math.h, correctly rounded
// but for ~1e-11), with condition numbers <= 1: 10 u and 22 u of the result.
Ref ref_gated(const Ref& g, const Ref& u, Gate fn) {
  Ref h;
  for (size_t i = 0; i < g.value.size(); ++i) {
    const double gv = g.value[i], uv = u.value[i], bg = g.bound[i], bu = u.bound[i];
    double a, b, slope, evaluation;
    if (fn.kind == Gate::Kind::SiluMul) {
      a = gv * sigmoid64(gv), b = uv, slope = 1.1, evaluation = 10 * kU;
    } else {
      a = fn.beta * std::tanh(gv / fn.beta) * sigmoid64(gv);
      b = fn.beta_lin * std::tanh(uv / fn.beta_lin);
      slope = 1 + fn.beta / 4, evaluation = 22 * kU;
    }
    h.value.push_back(a * b);
    const double a_max = std::fabs(a) + slope * bg, b_max = std::fabs(b) + bu;
    h.bound.push_back(std::fabs(b) * slope * bg + a_max * bu + evaluation * a_max * b_max);
  }
  return h;
}

// rmsnorm of each n-wide piece: x_i w_i / sqrt(mean(x^2) + eps). The fp32
// path's dot of positives is within gamma(depth) relative; /n, +eps, sqrtf
// (which halves what came before), 1/, x*r and w*() add six roundings.
Ref ref_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, size_t n, float eps) {
  Ref ref;
  for (size_t p = 0; p < x.size(); p += n) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[p + i]) * x[p + i];
    const double r = 1 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (size_t i = 0; i < n; ++i) {
      const double y = x[p + i] * r * (w.empty() ? 1.0 : w[i]);
      ref.value.push_back(y);
      ref.bound.push_back(rounding_gamma(canonical_depth(n) + 6) * std::fabs(y));
    }
  }
  return ref;
}

// ---------------------------------------------------------------------------
// write / read / copy / copy_rows / embed: exact

TEST(BackendOps, WriteReadCopyAndCopyRowsMoveValuesExactly) {
  for (size_t T : kShapeRows) {
    Rng rng(100 + T);
    const std::vector<float> host = random_floats(rng, (T + 2) * kWidth);
    // write in two pieces (row 0, then the rest at row0 = 1), read back in two
    const std::vector<float> rw = run_everywhere({at_t("write/read", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act a = be.act(n, kWidth);
      const std::vector<float> in = rows_of(host, kWidth, r0, n);
      be.write(a, 0, std::span<const float>(in).first(kWidth));
      be.write(a, 1, std::span<const float>(in).subspan(kWidth));
      std::vector<float> out(n * kWidth);
      const size_t half = n / 2;
      be.read(a, 0, std::span<float>(out).first(half * kWidth));
      be.read(a, half, std::span<float>(out).subspan(half * kWidth));
      return out;
    }});
    expect_same_bits(rw, rows_of(host, kWidth, 0, T), at_t("write/read", T));
    const std::vector<float> copied = run_everywhere({at_t("copy", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act src = upload(be, host, kWidth, r0, n), dst = be.act(n, kWidth);
      be.copy(src, dst);
      return download(be, dst);
    }});
    expect_same_bits(copied, rows_of(host, kWidth, 0, T), at_t("copy", T));
    // dst = rows [2 + r0, 2 + r0 + n) of a (T + 2)-row source
    const std::vector<float> rows = run_everywhere({at_t("copy_rows", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act src = upload(be, host, kWidth), dst = be.act(n, kWidth);
      be.copy_rows(src, 2 + r0, dst);
      return download(be, dst);
    }});
    expect_same_bits(rows, rows_of(host, kWidth, 2, T), at_t("copy_rows", T));
  }
}

TEST(BackendOps, EmbedWidensBf16AndCopiesF32Rows) {
  constexpr size_t kVocab = 50;
  for (WeightType type : {WeightType::BF16, WeightType::F32}) {
    Rng rng(200);
    const OwnedWeight table = random_weight(rng, type, kVocab, kWidth);
    for (size_t T : kShapeRows) {
      std::vector<uint32_t> ids(T);
      for (uint32_t& id : ids) id = static_cast<uint32_t>(rng.below(kVocab));
      const std::string what = at_t(std::string("embed ") + type_name(type), T);
      const std::vector<float> out = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
        Act a = be.act(n, kWidth);
        be.embed(table.view(), std::span<const uint32_t>(ids).subspan(r0, n), a);
        return download(be, a);
      }});
      // The definition: a BF16 value's fp32 bits are its 16 bits << 16.
      std::vector<float> want(T * kWidth);
      for (size_t t = 0; t < T; ++t)
        for (size_t i = 0; i < kWidth; ++i) {
          const size_t at = ids[t] * kWidth + i;
          if (type == WeightType::F32) {
            std::memcpy(&want[t * kWidth + i], table.data.data() + 4 * at, 4);
          } else {
            const uint32_t b = static_cast<uint32_t>(table.data[2 * at] | table.data[2 * at + 1] << 8) << 16;
            std::memcpy(&want[t * kWidth + i], &b, 4);
          }
        }
      expect_same_bits(out, want, what);
    }
  }
}

// ---------------------------------------------------------------------------
// matmul / gated_matmul

// Output rows not a multiple of kRowTile (4) nor of a thread count; columns
// with a partial last 32-group (MXFP4 and int4-group32: whole groups; FP8's
// last 128-column scale block partial too), and a second shape over kColBlock
// (512) so the batched path runs two column blocks.
struct ProductShape {
  size_t rows, cols;
};
constexpr ProductShape kProductShapes[] = {{37, kWidth}, {9, 530}};

std::vector<float> kernel_matmul(const WeightView& w, const std::vector<float>& x, size_t T) {
  IsaScope scope(Isa::Scalar);
  std::vector<float> y(T * w.rows);
  matmul(w, x.data(), T, y.data(), nullptr);
  return y;
}

TEST(BackendOps, MatmulOfEveryWeightTypeAtEveryShape) {
  for (WeightType type : kAllTypes)
    for (ProductShape s : kProductShapes) {
      Rng rng(300 + s.cols);
      const size_t cols = cols_for(type, s.cols);
      const OwnedWeight w = random_weight(rng, type, s.rows, cols);
      for (size_t T : kShapeRows) {
        const std::vector<float> x = random_floats(rng, T * cols);
        const std::string what = at_t(std::string("matmul ") + type_name(type) + " [" + std::to_string(s.rows) +
                                          ", " + std::to_string(cols) + "]",
                                      T);
        const std::vector<float> y = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
          Act xa = upload(be, x, cols, r0, n), ya = be.act(n, s.rows);
          be.matmul(w.view(), xa, ya);
          return download(be, ya);
        }});
        expect_same_bits(y, kernel_matmul(w.view(), x, T), what + " vs the kernel");
        expect_within(y, ref_matmul(w.view(), x, T), what + " vs float64");
      }
    }
}

TEST(BackendOps, GatedMatmulSiluAndSituOfEveryWeightType) {
  constexpr size_t kInter = 21;
  const Gate gates[] = {Gate::silu_mul(), Gate::situ(3.0f, 10.0f)};
  for (WeightType type : kAllTypes)
    for (const Gate& fn : gates) {
      Rng rng(400);
      const size_t cols = cols_for(type, kWidth);
      const OwnedWeight gate = random_weight(rng, type, kInter, cols), up = random_weight(rng, type, kInter, cols);
      for (size_t T : kShapeRows) {
        const std::vector<float> x = random_floats(rng, T * cols, 0.3);
        const std::string what = at_t(std::string("gated_matmul ") + (fn.kind == Gate::Kind::SiTU ? "situ " : "silu ") +
                                          type_name(type),
                                      T);
        const std::vector<float> h = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
          Act xa = upload(be, x, cols, r0, n), ha = be.act(n, kInter);
          be.gated_matmul(gate.view(), up.view(), xa, fn, ha);
          return download(be, ha);
        }});
        // The kernels' bits: the two products, then the activation per element.
        const std::vector<float> g = kernel_matmul(gate.view(), x, T), u = kernel_matmul(up.view(), x, T);
        std::vector<float> want(g.size());
        if (fn.kind == Gate::Kind::SiluMul) {
          for (size_t i = 0; i < g.size(); ++i) want[i] = silu(g[i]) * u[i];
        } else {
          situ(g.data(), u.data(), g.size(), fn.beta, fn.beta_lin, want.data());
        }
        expect_same_bits(h, want, what + " vs the kernels");
        expect_within(h, ref_gated(ref_matmul(gate.view(), x, T), ref_matmul(up.view(), x, T), fn), what + " vs float64");
      }
    }
}

// ---------------------------------------------------------------------------
// rmsnorm / rmsnorm_heads

TEST(BackendOps, RmsnormWithAndWithoutWeightsInPlaceOrNot) {
  constexpr float kEps = 1e-6f;
  Rng rng(500);
  const std::vector<float> weights = random_floats(rng, kWidth);
  for (size_t T : kShapeRows) {
    const std::vector<float> x = random_floats(rng, T * kWidth, 3.0);
    for (bool weighted : {true, false}) {
      const std::vector<float> w = weighted ? weights : std::vector<float>{};
      const std::string what = at_t(weighted ? "rmsnorm with weights" : "rmsnorm without weights", T);
      const std::vector<float> y = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
        Act xa = upload(be, x, kWidth, r0, n), ya = be.act(n, kWidth);
        be.rmsnorm(xa, w, kEps, ya);
        return download(be, ya);
      }});
      const std::vector<float> in_place = run_everywhere({what + " in place", T, true, [&](Backend& be, size_t r0, size_t n) {
        Act xa = upload(be, x, kWidth, r0, n);
        be.rmsnorm(xa, w, kEps, xa);
        return download(be, xa);
      }});
      expect_same_bits(in_place, y, what + ": in place vs not");
      std::vector<float> want(x.size());
      for (size_t t = 0; t < T; ++t)
        rmsnorm(x.data() + t * kWidth, weighted ? w.data() : nullptr, kWidth, kEps, want.data() + t * kWidth);
      expect_same_bits(y, want, what + " vs the kernel");
      expect_within(y, ref_rmsnorm(x, w, kWidth, kEps), what + " vs float64");
    }
  }
}

TEST(BackendOps, RmsnormHeadsNormalizesEachHeadInPlace) {
  constexpr size_t kHeads = 4, kHeadDim = 18;
  constexpr float kEps = 1e-6f;
  Rng rng(600);
  const std::vector<float> w = random_floats(rng, kHeadDim);
  for (size_t T : kShapeRows) {
    // Heads of unequal scale, so a norm over the whole row would be wrong.
    std::vector<float> x = random_floats(rng, T * kHeads * kHeadDim);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= static_cast<float>(1 + i / kHeadDim % kHeads);
    const std::string what = at_t("rmsnorm_heads", T);
    const std::vector<float> y = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
      Act xa = upload(be, x, kHeads * kHeadDim, r0, n);
      be.rmsnorm_heads(xa, w, kHeadDim, kEps);
      return download(be, xa);
    }});
    std::vector<float> want(x.size());
    for (size_t p = 0; p < x.size(); p += kHeadDim) rmsnorm(x.data() + p, w.data(), kHeadDim, kEps, want.data() + p);
    expect_same_bits(y, want, what + " vs the kernel");
    expect_within(y, ref_rmsnorm(x, w, kHeadDim, kEps), what + " vs float64");
  }
}

// ---------------------------------------------------------------------------
// rope_half / add / weighted_sum: exact in fp32

TEST(BackendOps, RopeHalfRotatesPairsOfEachHead) {
  constexpr size_t kHeads = 3, kHeadDim = 18, kHalf = kHeadDim / 2, kRowWidth = kHeads * kHeadDim;
  Rng rng(700);
  for (size_t T : kShapeRows) {
    const std::vector<float> x = random_floats(rng, T * kRowWidth);
    std::vector<float> cos(T * kHalf), sin(T * kHalf);
    for (size_t t = 0; t < T; ++t)
      for (size_t i = 0; i < kHalf; ++i) {
        const double angle = static_cast<double>(5 + t) * std::pow(10000.0, -2.0 * i / kHeadDim);
        cos[t * kHalf + i] = static_cast<float>(std::cos(angle));
        sin[t * kHalf + i] = static_cast<float>(std::sin(angle));
      }
    const std::string what = at_t("rope_half", T);
    const std::vector<float> y = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
      Act xa = upload(be, x, kRowWidth, r0, n), ca = upload(be, cos, kHalf, r0, n), sa = upload(be, sin, kHalf, r0, n);
      be.rope_half(xa, kHeadDim, ca, sa);
      return download(be, xa);
    }});
    // The definition (pairs i, i + half): lo' = lo cos - hi sin, hi' = hi cos
    // + lo sin, each product rounded; float64: two products and the sum, each
    // within u of its value: 3 u (|lo cos| + |hi sin|).
    std::vector<float> want(x.size());
    Ref ref{std::vector<double>(x.size()), std::vector<double>(x.size())};
    for (size_t t = 0; t < T; ++t)
      for (size_t h = 0; h < kHeads; ++h)
        for (size_t i = 0; i < kHalf; ++i) {
          const size_t lo = t * kRowWidth + h * kHeadDim + i, hi = lo + kHalf;
          const float c = cos[t * kHalf + i], s = sin[t * kHalf + i];
          want[lo] = x[lo] * c - x[hi] * s;
          want[hi] = x[hi] * c + x[lo] * s;
          ref.value[lo] = static_cast<double>(x[lo]) * c - static_cast<double>(x[hi]) * s;
          ref.value[hi] = static_cast<double>(x[hi]) * c + static_cast<double>(x[lo]) * s;
          const double mag_lo = std::fabs(static_cast<double>(x[lo]) * c) + std::fabs(static_cast<double>(x[hi]) * s);
          const double mag_hi = std::fabs(static_cast<double>(x[hi]) * c) + std::fabs(static_cast<double>(x[lo]) * s);
          ref.bound[lo] = 3 * kU * mag_lo;
          ref.bound[hi] = 3 * kU * mag_hi;
        }
    expect_same_bits(y, want, what + " vs the definition");
    expect_within(y, ref, what + " vs float64");
  }
}

// DeepSeek's interleaved RoPE: pair (x[2i], x[2i+1]) turns by angle i and
// lands at (i, i + half). Written from the definition (not via rope_half).
TEST(BackendOps, RopePairsRotatesInterleavedPairsIntoHalves) {
  constexpr size_t kHeads = 2, kHeadDim = 8, kHalf = kHeadDim / 2, kRowWidth = kHeads * kHeadDim;
  Rng rng(710);
  for (size_t T : kShapeRows) {
    const std::vector<float> x = random_floats(rng, T * kRowWidth);
    std::vector<float> cos(T * kHalf), sin(T * kHalf);
    for (size_t t = 0; t < T; ++t)
      for (size_t i = 0; i < kHalf; ++i) {
        const double angle = static_cast<double>(3 + t) * std::pow(50000.0, -2.0 * i / kHeadDim);
        cos[t * kHalf + i] = static_cast<float>(std::cos(angle));
        sin[t * kHalf + i] = static_cast<float>(std::sin(angle));
      }
    const std::string what = at_t("rope_pairs", T);
    const std::vector<float> y = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
      Act xa = upload(be, x, kRowWidth, r0, n), ca = upload(be, cos, kHalf, r0, n), sa = upload(be, sin, kHalf, r0, n);
      be.rope_pairs(xa, kHeadDim, ca, sa);
      return download(be, xa);
    }});
    std::vector<float> want(x.size());
    for (size_t t = 0; t < T; ++t)
      for (size_t h = 0; h < kHeads; ++h)
        for (size_t i = 0; i < kHalf; ++i) {
          const size_t base = t * kRowWidth + h * kHeadDim;
          const float even = x[base + 2 * i], odd = x[base + 2 * i + 1];
          const float c = cos[t * kHalf + i], s = sin[t * kHalf + i];
          want[base + i] = even * c - odd * s;
          want[base + kHalf + i] = odd * c + even * s;
        }
    expect_same_bits(y, want, what + " vs the definition");
  }
  // A hand-worked head: [1, 2, 3, 4] with angle 0 = 90 degrees (cos 0, sin 1)
  // and angle 1 = 0 (cos 1, sin 0): pair (1, 2) -> (-2, 1), pair (3, 4) stays.
  CpuBackend be(nullptr);
  Act xa = be.act(1, 4), ca = be.act(1, 2), sa = be.act(1, 2);
  be.write(xa, 0, std::vector<float>{1, 2, 3, 4});
  be.write(ca, 0, std::vector<float>{0, 1});
  be.write(sa, 0, std::vector<float>{1, 0});
  be.rope_pairs(xa, 4, ca, sa);
  std::vector<float> got(4);
  be.read(xa, 0, got);
  EXPECT_EQ(got, (std::vector<float>{-2, 3, 1, 4}));
}

// The rule for subnormal values (docs/vulkan.md): IEEE-754's, on every
// backend: a subnormal input, product or sum keeps its bits, never flushed to
// zero. Weights whose scales sit at the bottom of fp32 (MXFP4 scale bytes
// 0-4, fp32 and bf16 scales with exponent fields 0-4) give subnormal
// weights, products and outputs; sums of subnormals stay subnormal. Each
// case checks that its outputs do include subnormals, so a backend that
// flushed them could not pass.
size_t subnormal_count(const std::vector<float>& v) {
  size_t n = 0;
  for (float f : v) n += f != 0.0f && std::fabs(f) < std::numeric_limits<float>::min();
  return n;
}

TEST(BackendOps, SubnormalsKeepTheirBitsOnEveryBackend) {
  for (WeightType type : kAllTypes) {
    Rng rng(3600);
    const size_t cols = cols_for(type, kWidth), T = 3;
    const OwnedWeight w = random_weight(rng, type, 37, cols, 0, 4);
    std::vector<float> x = random_floats(rng, T * cols);
    if (type == WeightType::F32 || type == WeightType::BF16 || type == WeightType::Int8Row)
      for (float& v : x) v *= 1e-38f;  // these types have no scale to bring the products down
    const std::string what = std::string("subnormal matmul ") + type_name(type);
    const std::vector<float> y = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
      Act xa = upload(be, x, cols, r0, n), ya = be.act(n, w.rows);
      be.matmul(w.view(), xa, ya);
      return download(be, ya);
    }});
    expect_same_bits(y, kernel_matmul(w.view(), x, T), what + " vs the kernel");
    EXPECT_GT(subnormal_count(y), 0u) << what << ": no subnormal output, so nothing was tested";
  }
  Rng rng(3601);
  std::vector<float> a = random_floats(rng, 3 * kWidth), b = random_floats(rng, 3 * kWidth);
  for (size_t i = 0; i < a.size(); ++i) a[i] *= 1e-39f, b[i] *= 1e-39f;
  const std::vector<float> sum = run_everywhere({"subnormal add", 3, true, [&](Backend& be, size_t r0, size_t n) {
    Act xa = upload(be, a, kWidth, r0, n), da = upload(be, b, kWidth, r0, n);
    be.add(xa, da);
    return download(be, xa);
  }});
  std::vector<float> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + b[i];
  expect_same_bits(sum, want, "subnormal add vs the definition");
  EXPECT_GT(subnormal_count(sum), a.size() / 2);
}

TEST(BackendOps, AddIsTheFp32Sum) {
  Rng rng(800);
  for (size_t T : kShapeRows) {
    const std::vector<float> x = random_floats(rng, T * kWidth), d = random_floats(rng, T * kWidth, 1e-3);
    const std::vector<float> y = run_everywhere({at_t("add", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act xa = upload(be, x, kWidth, r0, n), da = upload(be, d, kWidth, r0, n);
      be.add(xa, da);
      return download(be, xa);
    }});
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] + d[i];  // one IEEE rounding: the float64 sum, rounded
    expect_same_bits(y, want, at_t("add", T) + " vs the definition");
  }
}

TEST(BackendOps, WeightedSumAddsRoundedProductsInOrder) {
  Rng rng(900);
  for (size_t k : {size_t{1}, size_t{3}, size_t{8}})
    for (size_t T : kShapeRows) {
      const std::vector<float> y = random_floats(rng, T * k * kWidth), w = random_floats(rng, T * k, 0.5);
      const std::string what = at_t("weighted_sum k=" + std::to_string(k), T);
      const std::vector<float> out = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
        Act ya = upload(be, y, kWidth, r0 * k, n * k), oa = be.act(n, kWidth);
        be.weighted_sum(ya, std::span<const float>(w).subspan(r0 * k, n * k), k, oa);
        return download(be, oa);
      }});
      // The definition (backend.h): from 0, in i order, each product rounded
      // then added; float64: k roundings of products and k of sums, so
      // gamma(k + 1) of sum |y w| (the first addition, to 0, is exact).
      std::vector<float> want(T * kWidth);
      Ref ref{std::vector<double>(T * kWidth), std::vector<double>(T * kWidth)};
      for (size_t t = 0; t < T; ++t)
        for (size_t c = 0; c < kWidth; ++c) {
          float acc = 0.0f;
          double acc64 = 0, mag = 0;
          for (size_t i = 0; i < k; ++i) {
            const float yi = y[(t * k + i) * kWidth + c], wi = w[t * k + i];
            const float prod = yi * wi;
            acc = acc + prod;
            acc64 += static_cast<double>(yi) * wi;
            mag += std::fabs(static_cast<double>(yi) * wi);
          }
          want[t * kWidth + c] = acc;
          ref.value[t * kWidth + c] = acc64;
          ref.bound[t * kWidth + c] = rounding_gamma(static_cast<double>(k + 1)) * mag;
        }
      expect_same_bits(out, want, what + " vs the definition");
      expect_within(out, ref, what + " vs float64");
    }
}

// ---------------------------------------------------------------------------
// gather / scatter / kv_store: exact

TEST(BackendOps, GatherAndScatterMoveWholeRows) {
  constexpr size_t kSource = 7;
  Rng rng(1000);
  const std::vector<float> src = random_floats(rng, kSource * kWidth);
  for (size_t T : kShapeRows) {
    std::vector<uint32_t> picks(T);  // with repeats
    for (uint32_t& p : picks) p = static_cast<uint32_t>(rng.below(kSource));
    const std::vector<float> gathered = run_everywhere({at_t("gather", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act sa = upload(be, src, kWidth), da = be.act(n, kWidth);
      be.gather(sa, std::span<const uint32_t>(picks).subspan(r0, n), da);
      return download(be, da);
    }});
    std::vector<float> want;
    for (uint32_t p : picks) {
      const std::vector<float> row = rows_of(src, kWidth, p, 1);
      want.insert(want.end(), row.begin(), row.end());
    }
    expect_same_bits(gathered, want, at_t("gather", T));

    // scatter: T distinct rows of a (T + 2)-row destination, in shuffled order.
    const size_t D = T + 2;
    std::vector<uint32_t> targets(D);
    for (size_t i = 0; i < D; ++i) targets[i] = static_cast<uint32_t>(i);
    for (size_t i = D - 1; i > 0; --i) std::swap(targets[i], targets[rng.below(i + 1)]);
    targets.resize(T);
    const std::vector<float> rows = random_floats(rng, T * kWidth), background = random_floats(rng, D * kWidth);
    // Returns row targets[j] of the destination for each j in [r0, r0 + n),
    // after checking that every other row kept its value.
    const std::vector<float> scattered = run_everywhere({at_t("scatter", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act sa = upload(be, rows, kWidth, r0, n), da = upload(be, background, kWidth);
      const std::span<const uint32_t> to = std::span<const uint32_t>(targets).subspan(r0, n);
      be.scatter(sa, to, da);
      std::vector<float> all = download(be, da), out;
      for (size_t r = 0; r < D; ++r) {
        const std::vector<float> row = rows_of(all, kWidth, r, 1);
        if (std::find(to.begin(), to.end(), r) == to.end())
          expect_same_bits(row, rows_of(background, kWidth, r, 1), "scatter: untouched row " + std::to_string(r));
      }
      for (uint32_t r : to) {
        const std::vector<float> row = rows_of(all, kWidth, r, 1);
        out.insert(out.end(), row.begin(), row.end());
      }
      return out;
    }});
    expect_same_bits(scattered, rows, at_t("scatter", T));
  }
}

TEST(BackendOps, KvStoreWritesKeysAndValuesAtTheirPositions) {
  constexpr size_t kKvWidth = 20, kStride = 24;
  constexpr int64_t kStart = 5;
  constexpr float kUnwritten = 1234.5f;
  Rng rng(1100);
  for (size_t T : kShapeRows) {
    const size_t positions = kStart + T + 2;
    const std::vector<float> k = random_floats(rng, T * kKvWidth), v = random_floats(rng, T * kKvWidth);
    // Returns, per row, its position's stride of keys then of values, after
    // checking that no other position was written.
    const std::vector<float> stored = run_everywhere({at_t("kv_store", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      std::vector<float> keys(positions * kStride, kUnwritten), values(positions * kStride, kUnwritten);
      Act ka = upload(be, k, kKvWidth, r0, n), va = upload(be, v, kKvWidth, r0, n);
      be.kv_store(ka, va, KvLayer{keys.data(), values.data(), kStride}, kStart + static_cast<int64_t>(r0));
      std::vector<float> out;
      for (size_t p = 0; p < positions; ++p) {
        const size_t t = p - static_cast<size_t>(kStart);
        const bool written = p >= static_cast<size_t>(kStart) && t >= r0 && t < r0 + n;
        const std::vector<float> kp = rows_of(keys, kStride, p, 1), vp = rows_of(values, kStride, p, 1);
        if (!written) {
          EXPECT_TRUE(std::all_of(kp.begin(), kp.end(), [&](float f) { return f == kUnwritten; })) << "position " << p;
          EXPECT_TRUE(std::all_of(vp.begin(), vp.end(), [&](float f) { return f == kUnwritten; })) << "position " << p;
          continue;
        }
        out.insert(out.end(), kp.begin(), kp.end());
        out.insert(out.end(), vp.begin(), vp.end());
      }
      return out;
    }});
    std::vector<float> want;
    for (size_t t = 0; t < T; ++t)
      for (const std::vector<float>* src : {&k, &v}) {
        const std::vector<float> row = rows_of(*src, kKvWidth, t, 1);
        want.insert(want.end(), row.begin(), row.end());
        want.insert(want.end(), kStride - kKvWidth, kUnwritten);  // the stride's tail is not the op's
      }
    expect_same_bits(stored, want, at_t("kv_store", T));
  }
}

// ---------------------------------------------------------------------------
// attention_gqa

struct AttentionCase {
  GqaShape shape;
  size_t T = 0;
  std::vector<float> q, k, v;  // q [T, heads * head_dim]; k, v [start + T, kv_heads * head_dim]

  size_t q_width() const { return shape.heads * shape.head_dim; }
  size_t kv_width() const { return shape.kv_heads * shape.head_dim; }
  size_t positions() const { return static_cast<size_t>(shape.start) + T; }
};

AttentionCase attention_case(size_t T, Rng& rng) {
  AttentionCase c;
  c.shape.heads = 6, c.shape.kv_heads = 3, c.shape.head_dim = 10, c.shape.start = 5;  // 2 query heads per kv head
  c.shape.scale = 1.0f / std::sqrt(10.0f);
  c.T = T;
  c.q = random_floats(rng, T * c.q_width(), 1.5);
  c.k = random_floats(rng, c.positions() * c.kv_width(), 1.5);
  c.v = random_floats(rng, c.positions() * c.kv_width());
  return c;
}

// Rows [r0, r0 + n) of the case's queries, at positions start + r0 ..., over
// a cache of every position (filled by kv_store): later positions are there
// too, so a row that reads past its own position is caught.
bool run_attention(Backend& be, const AttentionCase& c, size_t r0, size_t n, const std::function<bool()>& stop,
                   std::vector<float>& out) {
  const size_t stride = c.kv_width() + 3;
  std::vector<float> keys(c.positions() * stride), values(c.positions() * stride);
  const KvLayer cache{keys.data(), values.data(), stride};
  Act ka = upload(be, c.k, c.kv_width()), va = upload(be, c.v, c.kv_width());
  be.kv_store(ka, va, cache, 0);
  Act qa = upload(be, c.q, c.q_width(), r0, n), oa = be.act(n, c.q_width());
  GqaShape shape = c.shape;
  shape.start += static_cast<int64_t>(r0);
  const bool done = be.attention_gqa(qa, cache, shape, oa, stop);
  out = download(be, oa);
  return done;
}

// Per (row t, head h), over positions j <= start + t of kv head h / group:
// s_j = scale q.k_j, p = softmax(s), out = sum_j p_j v_j, in float64. Bound:
// the score is a canonical dot then a multiply, |ds_j| <= gamma(D + 1) scale
// sum_i |q_i k_ji| (D = canonical depth of head_dim). Each e_j = expf(s_j - m)
// then carries a relative error de <= 2 max ds + u |s_j - m| + 2 u (the
// subtraction, expf), p_j = e_j / sum e <= 2 de + gamma(Dn + 1) (a canonical
// sum of n positives, the divide), and out = sum p_j v_j (products rounded,
// added in order from 0) adds gamma(n + 1): |out - ref| <= (dp + gamma(n + 1))
// sum_j p_j |v_j|.
Ref ref_attention(const AttentionCase& c) {
  const size_t H = c.shape.heads, hd = c.shape.head_dim, G = H / c.shape.kv_heads;
  Ref ref;
  for (size_t t = 0; t < c.T; ++t)
    for (size_t h = 0; h < H; ++h) {
      const size_t n = static_cast<size_t>(c.shape.start) + t + 1, kv = h / G;
      const float* q = c.q.data() + t * c.q_width() + h * hd;
      std::vector<double> s(n), p(n);
      double ds_max = 0;
      for (size_t j = 0; j < n; ++j) {
        const float* key = c.k.data() + j * c.kv_width() + kv * hd;
        double dot = 0, mag = 0;
        for (size_t i = 0; i < hd; ++i) dot += static_cast<double>(q[i]) * key[i], mag += std::fabs(static_cast<double>(q[i]) * key[i]);
        s[j] = dot * c.shape.scale;
        ds_max = std::max(ds_max, rounding_gamma(canonical_depth(hd) + 1) * mag * c.shape.scale);
      }
      const double m = *std::max_element(s.begin(), s.end());
      double total = 0, range = 0;
      for (size_t j = 0; j < n; ++j) p[j] = std::exp(s[j] - m), total += p[j], range = std::max(range, m - s[j]);
      for (double& pj : p) pj /= total;
      const double de = 2 * ds_max + kU * (range + 2 * ds_max) + 2 * kU;
      const double dp = 2 * de + rounding_gamma(canonical_depth(n) + 1);
      for (size_t i = 0; i < hd; ++i) {
        double o = 0, mag = 0;
        for (size_t j = 0; j < n; ++j) {
          const double vj = c.v[j * c.kv_width() + kv * hd + i];
          o += p[j] * vj, mag += p[j] * std::fabs(vj);
        }
        ref.value.push_back(o);
        ref.bound.push_back((dp + rounding_gamma(static_cast<double>(n + 1))) * mag);
      }
    }
  return ref;
}

// The kernels' bits: one kernel attention per (row, head).
std::vector<float> kernel_attention(const AttentionCase& c) {
  IsaScope scope(Isa::Scalar);
  const size_t H = c.shape.heads, hd = c.shape.head_dim, G = H / c.shape.kv_heads;
  std::vector<float> out(c.T * c.q_width()), scratch(c.positions());
  for (size_t t = 0; t < c.T; ++t)
    for (size_t h = 0; h < H; ++h)
      attention(c.q.data() + t * c.q_width() + h * hd, c.k.data() + h / G * hd, c.kv_width(), c.v.data() + h / G * hd,
                c.kv_width(), static_cast<size_t>(c.shape.start) + t + 1, hd, hd, c.shape.scale, scratch.data(),
                out.data() + t * c.q_width() + h * hd);
  return out;
}

TEST(BackendOps, AttentionGqaIsCausalPerKvHeadFromAStartPosition) {
  Rng rng(1200);
  for (size_t T : kShapeRows) {
    const AttentionCase c = attention_case(T, rng);
    const std::string what = at_t("attention_gqa 6 heads over 3", T);
    const std::vector<float> out = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
      std::vector<float> o;
      EXPECT_TRUE(run_attention(be, c, r0, n, nullptr, o));
      return o;
    }});
    // A stop that never abandons changes no bit.
    const std::vector<float> with_stop = run_everywhere({what + " with a stop", T, true, [&](Backend& be, size_t r0, size_t n) {
      std::vector<float> o;
      EXPECT_TRUE(run_attention(be, c, r0, n, [] { return false; }, o));
      return o;
    }});
    expect_same_bits(with_stop, out, what + ": with a stop that never abandons");
    expect_same_bits(out, kernel_attention(c), what + " vs the kernel");
    expect_within(out, ref_attention(c), what + " vs float64");
  }
}

TEST(BackendOps, AttentionStopIsAskedBetweenBlocksAndAbandons) {
  Rng rng(1300);
  const AttentionCase long_case = attention_case(kLongT, rng), short_case = attention_case(3, rng);
  const size_t blocks = (kLongT + Backend::kAttentionStopRows - 1) / Backend::kAttentionStopRows;
  for_each_backend([&](Instance& inst, const std::string& where) {
    Backend& be = *inst.backend;
    std::vector<float> out;
    size_t asked = 0;
    // Never abandons: asked between every two blocks, not after the last.
    EXPECT_TRUE(run_attention(be, long_case, 0, kLongT, [&] { return ++asked, false; }, out)) << where;
    EXPECT_EQ(asked, blocks - 1) << where;
    // Abandons at its second ask: the op returns false and asks no more.
    asked = 0;
    EXPECT_FALSE(run_attention(be, long_case, 0, kLongT, [&] { return ++asked == 2; }, out)) << where;
    EXPECT_EQ(asked, 2u) << where;
    // One block: nothing between blocks, so never asked, and the op completes.
    asked = 0;
    EXPECT_TRUE(run_attention(be, short_case, 0, 3, [&] { return ++asked, true; }, out)) << where;
    EXPECT_EQ(asked, 0u) << where;
    expect_same_bits(out, kernel_attention(short_case), where + ": a one-block op the stop could not abandon");
  });
}

// ---------------------------------------------------------------------------
// run_experts

// Each expert: h = silu(gate x) * (up x) (BF16), y = down h (Int8Row). Every
// expert must run exactly once and give the bits of the same ops issued one
// after another outside run_experts.
TEST(BackendOps, RunExpertsComputesEachExpertOnceWithItsOwnBits) {
  constexpr size_t kInter = 21, kOut = 9;
  const std::vector<std::vector<size_t>> groups = {std::vector<size_t>(6, 1), {3, kLongT, 1, 40}};
  for (const std::vector<size_t>& rows : groups) {
    Rng rng(1400 + rows.size());
    std::vector<OwnedWeight> gate, up, down;
    std::vector<std::vector<float>> x;
    for (size_t r : rows) {
      gate.push_back(random_weight(rng, WeightType::BF16, kInter, kWidth));
      up.push_back(random_weight(rng, WeightType::BF16, kInter, kWidth));
      down.push_back(random_weight(rng, WeightType::Int8Row, kOut, kInter));
      x.push_back(random_floats(rng, r * kWidth, 0.3));
    }
    auto expert = [&](Backend& be, size_t j) {
      Act xa = upload(be, x[j], kWidth), ha = be.act(rows[j], kInter), ya = be.act(rows[j], kOut);
      be.gated_matmul(gate[j].view(), up[j].view(), xa, Gate::silu_mul(), ha);
      be.matmul(down[j].view(), ha, ya);
      return download(be, ya);
    };
    const std::string what = "run_experts of " + std::to_string(rows.size()) + " experts";
    const std::vector<float> all = run_everywhere({what, 1, false, [&](Backend& be, size_t, size_t) {
      std::vector<std::vector<float>> outs(rows.size());
      std::vector<std::atomic<int>> calls(rows.size());
      be.run_experts(rows, [&](size_t j) {
        calls[j]++;
        outs[j] = expert(be, j);
      });
      std::vector<float> flat;
      for (size_t j = 0; j < rows.size(); ++j) {
        EXPECT_EQ(calls[j].load(), 1) << what << ": expert " << j;
        flat.insert(flat.end(), outs[j].begin(), outs[j].end());
      }
      return flat;
    }});
    const std::vector<float> serial = on_reference([&](Backend& be) {
      std::vector<float> flat;
      for (size_t j = 0; j < rows.size(); ++j) {
        const std::vector<float> y = expert(be, j);
        flat.insert(flat.end(), y.begin(), y.end());
      }
      return flat;
    });
    expect_same_bits(all, serial, what + " vs the experts one after another");
  }
}

// ---------------------------------------------------------------------------
// The buffer pool and shape errors

// One pass of the ops a layer issues, at T rows (its Acts die at the end).
struct PassWeights {
  OwnedWeight embed, q, gate, up, down;
};

void layer_pass(Backend& be, const PassWeights& pw, size_t T) {
  constexpr size_t kHeads = 2, kHeadDim = 10, kHalf = kHeadDim / 2, kQ = kHeads * kHeadDim;
  std::vector<uint32_t> ids(T), order(T), pairs(2 * T);
  for (size_t t = 0; t < T; ++t) ids[t] = static_cast<uint32_t>(t % pw.embed.rows), order[t] = static_cast<uint32_t>(T - 1 - t);
  for (size_t i = 0; i < 2 * T; ++i) pairs[i] = static_cast<uint32_t>(i / 2);
  Act x = be.act(T, kWidth), h = be.act(T, kWidth);
  be.embed(pw.embed.view(), ids, x);
  be.rmsnorm(x, {}, 1e-6f, h);
  Act q = be.act(T, kQ), cs = be.act(T, kHalf);
  be.matmul(pw.q.view(), h, q);
  be.write(cs, 0, std::vector<float>(T * kHalf, 0.5f));
  be.rope_half(q, kHeadDim, cs, cs);
  be.rmsnorm_heads(q, std::vector<float>(kHeadDim, 1.0f), kHeadDim, 1e-6f);
  std::vector<float> keys(T * kQ), values(T * kQ);
  const KvLayer cache{keys.data(), values.data(), kQ};
  be.kv_store(q, q, cache, 0);
  Act attn = be.act(T, kQ);
  EXPECT_TRUE(be.attention_gqa(q, cache, GqaShape{kHeads, 1, kHeadDim, 0, 0.3f}, attn, nullptr));
  Act mlp = be.act(T, pw.gate.rows), down = be.act(T, kWidth);
  be.gated_matmul(pw.gate.view(), pw.up.view(), h, Gate::situ(3.0f, 10.0f), mlp);
  be.matmul(pw.down.view(), mlp, down);
  be.add(x, down);
  Act twice = be.act(2 * T, kWidth), sum = be.act(T, kWidth), out = be.act(T, kWidth);
  be.gather(x, pairs, twice);
  be.weighted_sum(twice, std::vector<float>(2 * T, 0.5f), 2, sum);
  be.scatter(sum, order, out);
  be.copy(out, h);
  Act last = be.act(1, kWidth);
  be.copy_rows(h, T - 1, last);
  std::vector<float> host(kWidth);
  be.read(last, 0, host);
}

// After one pass of each shape, the same passes again take every buffer
// from the pool. (run_experts is left out: with a pool, how many of its
// experts' buffers are out at once depends on the threads' timing.)
TEST(BackendOps, ARepeatedPassMakesNoNewBuffers) {
  Rng rng(1500);
  const PassWeights pw{random_weight(rng, WeightType::BF16, 11, kWidth), random_weight(rng, WeightType::F32, 20, kWidth),
                       random_weight(rng, WeightType::BF16, 21, kWidth), random_weight(rng, WeightType::BF16, 21, kWidth),
                       random_weight(rng, WeightType::Int8Row, kWidth, 21)};
  for (const BackendRow& row : backend_rows()) {
    Instance inst = row.make();
    auto passes = [&] {
      for (size_t T : {size_t{3}, kLongT, size_t{1}}) layer_pass(*inst.backend, pw, T);
    };
    passes();
    const size_t made = inst.buffers_made();
    EXPECT_GT(made, 0u) << row.name;
    passes();
    passes();
    EXPECT_EQ(inst.buffers_made(), made) << row.name << ": the same passes again made buffers";
  }
}

// A shape that does not fit is an Error naming the op, on every backend.
TEST(BackendOps, ShapeErrorsNameTheOp) {
  Rng rng(1600);
  const OwnedWeight w = random_weight(rng, WeightType::BF16, 5, kWidth);
  const OwnedWeight mx = random_weight(rng, WeightType::MXFP4, 4, 64), i8 = random_weight(rng, WeightType::Int8Row, 4, kWidth);
  for_each_backend([&](Instance& inst, const std::string& where) {
    SCOPED_TRACE(where);
    Backend& be = *inst.backend;
    Act x = be.act(3, kWidth), narrow = be.act(3, kWidth - 1), y = be.act(3, 5), wrong_rows = be.act(2, 5);
    const std::vector<float> four(4 * kWidth);
    EXPECT_FAILS_WITH(be.write(x, 0, four), "write");
    EXPECT_FAILS_WITH(be.write(x, 1, std::span<const float>(four).first(kWidth - 1)), "write");
    std::vector<float> host(kWidth);
    EXPECT_FAILS_WITH(be.read(x, 3, host), "read");
    EXPECT_FAILS_WITH(be.copy(x, narrow), "copy");
    EXPECT_FAILS_WITH(be.copy_rows(x, 1, x), "copy_rows");
    EXPECT_FAILS_WITH(be.copy_rows(x, 0, narrow), "copy_rows");
    const std::vector<uint32_t> ids = {0, 1, 5};
    Act e = be.act(3, kWidth);
    EXPECT_FAILS_WITH(be.embed(w.view(), ids, e), "embed", "id 5");
    Act e2 = be.act(2, kWidth);
    EXPECT_FAILS_WITH(be.embed(i8.view(), std::span<const uint32_t>(ids).first(2), e2), "embed", "int8-row");
    EXPECT_FAILS_WITH(be.embed(w.view(), std::span<const uint32_t>(ids).first(2), e), "embed");
    EXPECT_FAILS_WITH(be.matmul(w.view(), narrow, y), "matmul");
    EXPECT_FAILS_WITH(be.matmul(w.view(), x, wrong_rows), "matmul");
    WeightView mx_70 = mx.view();  // MXFP4 takes whole 32-column groups only
    mx_70.cols = kWidth;
    Act mx_y = be.act(3, 4);
    EXPECT_FAILS_WITH(be.matmul(mx_70, x, mx_y), "matmul", "32");
    EXPECT_FAILS_WITH(be.gated_matmul(w.view(), w.view(), narrow, Gate::silu_mul(), y), "gated_matmul");
    EXPECT_FAILS_WITH(be.gated_matmul(w.view(), w.view(), x, Gate::silu_mul(), wrong_rows), "gated_matmul");
    EXPECT_FAILS_WITH(be.rmsnorm(x, std::vector<float>(kWidth - 1), 1e-6f, x), "rmsnorm");
    EXPECT_FAILS_WITH(be.rmsnorm(x, {}, 1e-6f, narrow), "rmsnorm");
    EXPECT_FAILS_WITH(be.rmsnorm_heads(x, std::vector<float>(3), 3, 1e-6f), "rmsnorm_heads");  // 70 % 3 != 0
    EXPECT_FAILS_WITH(be.rmsnorm_heads(x, std::vector<float>(7), 10, 1e-6f), "rmsnorm_heads");
    Act half = be.act(3, 5), short_half = be.act(2, 5);
    EXPECT_FAILS_WITH(be.rope_half(x, 7, half, half), "rope_half");  // odd head_dim
    EXPECT_FAILS_WITH(be.rope_half(x, 10, short_half, half), "rope_half");
    EXPECT_FAILS_WITH(be.add(x, narrow), "add");
    Act y2 = be.act(6, kWidth);
    EXPECT_FAILS_WITH(be.weighted_sum(x, std::vector<float>(3), 2, x), "weighted_sum");
    EXPECT_FAILS_WITH(be.weighted_sum(y2, std::vector<float>(5), 2, x), "weighted_sum");
    EXPECT_FAILS_WITH(be.gather(x, std::vector<uint32_t>{0, 1, 3}, e), "gather", "row 3");
    EXPECT_FAILS_WITH(be.gather(x, std::vector<uint32_t>{0, 1}, e), "gather");
    EXPECT_FAILS_WITH(be.scatter(x, std::vector<uint32_t>{0, 1, 3}, e), "scatter", "row 3");
    EXPECT_FAILS_WITH(be.scatter(x, std::vector<uint32_t>{0, 1}, e), "scatter");
    std::vector<float> keys(8 * kWidth), values(8 * kWidth);
    EXPECT_FAILS_WITH(be.kv_store(x, narrow, KvLayer{keys.data(), values.data(), kWidth}, 0), "kv_store");
    EXPECT_FAILS_WITH(be.kv_store(x, x, KvLayer{keys.data(), values.data(), kWidth - 1}, 0), "kv_store");
    const KvLayer cache{keys.data(), values.data(), kWidth};
    Act q = be.act(3, 60), o = be.act(3, 60);
    EXPECT_FAILS_WITH(be.attention_gqa(q, cache, GqaShape{6, 4, 10, 0, 1.0f}, o, nullptr), "attention");  // 6 % 4
    EXPECT_FAILS_WITH(be.attention_gqa(x, cache, GqaShape{6, 2, 10, 0, 1.0f}, o, nullptr), "attention");
    EXPECT_FAILS_WITH(be.attention_gqa(q, cache, GqaShape{6, 2, 10, 0, 1.0f}, x, nullptr), "attention");
  });
}

// A gated pair whose up weight does not match its gate: the CPU backend
// passes it to the kernel, whose error names matmul_pair, not the op the
// caller issued.
TEST(BackendOps, GatedMatmulWithAMismatchedUpWeightNamesTheOp) {
  Rng rng(1700);
  const OwnedWeight gate = random_weight(rng, WeightType::BF16, 5, kWidth), up = random_weight(rng, WeightType::BF16, 6, kWidth);
  for_each_backend([&](Instance& inst, const std::string& where) {
    SCOPED_TRACE(where);
    Backend& be = *inst.backend;
    Act x = be.act(3, kWidth), h = be.act(3, 5);
    EXPECT_FAILS_WITH(be.gated_matmul(gate.view(), up.view(), x, Gate::silu_mul(), h), "gated_matmul");
  });
}

// Positions are >= 0. kv_store at start -1 writes the row before the cache
// (here into a margin, so the test itself writes nothing out of bounds);
// attention at start -1 reads zero positions for its first row and returns
// zeros. Neither is reported.
TEST(BackendOps, ANegativeStartIsAnErrorNamingTheOp) {
  constexpr size_t kKvWidth = 20;
  for_each_backend([&](Instance& inst, const std::string& where) {
    SCOPED_TRACE(where);
    Backend& be = *inst.backend;
    std::vector<float> keys(8 * kKvWidth, 0.0f), values(8 * kKvWidth, 0.0f);
    const KvLayer cache{keys.data() + 2 * kKvWidth, values.data() + 2 * kKvWidth, kKvWidth};
    Act k = be.act(1, kKvWidth);
    be.write(k, 0, std::vector<float>(kKvWidth, 1.0f));
    EXPECT_FAILS_WITH(be.kv_store(k, k, cache, -1), "kv_store");
    Act q = be.act(1, 2 * 10), out = be.act(1, 2 * 10);
    be.write(q, 0, std::vector<float>(20, 1.0f));
    EXPECT_FAILS_WITH(be.attention_gqa(q, cache, GqaShape{2, 2, 10, -1, 1.0f}, out, nullptr), "attention");
  });
}

// ---------------------------------------------------------------------------
// place_rows / copy_cols / round_bf16: exact moves and one rounding

TEST(BackendOps, PlaceRowsAndCopyColsMoveExactlyTheirBlock) {
  constexpr float kUnwritten = 1234.5f;
  Rng rng(1800);
  for (size_t T : kShapeRows) {
    const std::vector<float> x = random_floats(rng, T * kWidth);
    // place_rows: rows [2, 2 + T) of a [T + 3, kWidth] Act become x, the rest untouched.
    const std::vector<float> placed = run_everywhere({at_t("place_rows", T), T, false, [&](Backend& be, size_t, size_t) {
      Act xa = upload(be, x, kWidth), dst = be.act(T + 3, kWidth);
      be.write(dst, 0, std::vector<float>((T + 3) * kWidth, kUnwritten));
      be.place_rows(xa, 2, dst);
      return download(be, dst);
    }});
    std::vector<float> want((T + 3) * kWidth, kUnwritten);
    std::copy(x.begin(), x.end(), want.begin() + 2 * kWidth);
    expect_same_bits(placed, want, at_t("place_rows", T));
    // copy_cols: columns [5, 5 + 17) of each row to columns [3, 3 + 17) of a 30-wide Act.
    const std::vector<float> cols = run_everywhere({at_t("copy_cols", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act xa = upload(be, x, kWidth, r0, n), dst = be.act(n, 30);
      be.write(dst, 0, std::vector<float>(n * 30, kUnwritten));
      be.copy_cols(xa, 5, 17, dst, 3);
      return download(be, dst);
    }});
    std::vector<float> want_cols(T * 30, kUnwritten);
    for (size_t t = 0; t < T; ++t)
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(t * kWidth + 5), 17, want_cols.begin() + static_cast<std::ptrdiff_t>(t * 30 + 3));
    expect_same_bits(cols, want_cols, at_t("copy_cols", T));
  }
}

// BF16 keeps the top 16 bits of the fp32 pattern, rounded to nearest even:
// the result's low 16 bits are zero and it is within half a BF16 ulp
// (2^-8 of the input: BF16 keeps 8 significant bits); ties (low half exactly 0x8000) go to the
// even neighbour.
TEST(BackendOps, RoundBf16KeepsTheNearestBf16AtItsColumns) {
  constexpr float kUnwritten = 1234.5f;
  Rng rng(1900);
  for (size_t T : kShapeRows) {
    std::vector<float> x = random_floats(rng, T * kWidth, 10.0);
    uint32_t tie_odd = 0x3f818000u, tie_even = 0x3f808000u;  // 1.0117..: upper odd, ties up; upper even, ties down
    std::memcpy(&x[0], &tie_odd, 4);
    std::memcpy(&x[1], &tie_even, 4);
    const std::vector<float> y = run_everywhere({at_t("round_bf16", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act xa = upload(be, x, kWidth, r0, n), dst = be.act(n, kWidth + 9);
      be.write(dst, 0, std::vector<float>(n * (kWidth + 9), kUnwritten));
      be.round_bf16(xa, dst, 4);
      return download(be, dst);
    }});
    for (size_t t = 0; t < T; ++t)
      for (size_t c = 0; c < kWidth + 9; ++c) {
        const float got = y[t * (kWidth + 9) + c];
        if (c < 4 || c >= 4 + kWidth) {
          ASSERT_EQ(got, kUnwritten) << "row " << t << " column " << c;
          continue;
        }
        const float in = x[t * kWidth + c - 4];
        ASSERT_EQ(bits(got) & 0xffffu, 0u) << "row " << t << " column " << c;
        ASSERT_LE(std::fabs(static_cast<double>(got) - in), 0x1p-8 * std::fabs(static_cast<double>(in))) << t << " " << c;
      }
    EXPECT_EQ(bits(y[4]), 0x3f820000u) << "a tie with an odd upper half rounds up";
    EXPECT_EQ(bits(y[5]), 0x3f800000u) << "a tie with an even upper half rounds down";
  }
}

// ---------------------------------------------------------------------------
// mul_sigmoid / depth_mix

TEST(BackendOps, MulSigmoidGatesEachElement) {
  Rng rng(2000);
  for (size_t T : kShapeRows) {
    const std::vector<float> x = random_floats(rng, T * kWidth, 2.0), g = random_floats(rng, T * kWidth, 6.0);
    const std::vector<float> y = run_everywhere({at_t("mul_sigmoid", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      Act xa = upload(be, x, kWidth, r0, n), ga = upload(be, g, kWidth, r0, n);
      be.mul_sigmoid(xa, ga);
      return download(be, xa);
    }});
    // The definition with the kernel's sigmoid; float64: expf within 2 u, the
    // +1, the divide and the product one rounding each (the condition number
    // of 1 / (1 + e) in e is below 1): 5 u of |x sigmoid(g)|.
    std::vector<float> want(x.size());
    Ref ref;
    for (size_t i = 0; i < x.size(); ++i) {
      want[i] = x[i] * sigmoid(g[i]);
      ref.value.push_back(x[i] * sigmoid64(g[i]));
      ref.bound.push_back(5 * kU * std::fabs(ref.value.back()));
    }
    expect_same_bits(y, want, at_t("mul_sigmoid", T) + " vs the definition");
    expect_within(y, ref, at_t("mul_sigmoid", T) + " vs float64");
  }
}

// The softmax-weighted sum of the last step (alpha_j = softmax of scores
// with errors ds_j) follows ref_attention's argument: e_j = expf(s_j - m)
// carries de <= 2 max ds + u |s_j - m| + 2 u, p_j <= 2 de + gamma(D_n + 1),
// and out = sum_j p_j v_j from 0 adds gamma(n + 1) of sum_j p_j |v_j|.
double softmax_sum_bound(double ds_max, double range, size_t n) {
  const double de = 2 * ds_max + kU * (range + 2 * ds_max) + 2 * kU;
  return 2 * de + rounding_gamma(canonical_depth(n) + 1) + rounding_gamma(static_cast<double>(n + 1));
}

TEST(BackendOps, DepthMixIsTheSoftmaxOverDepthOfNormedValues) {
  constexpr float kEps = 1e-6f;
  Rng rng(2100);
  const std::vector<float> s = random_floats(rng, kWidth, 0.3);
  for (size_t depth : {size_t{1}, size_t{2}, size_t{5}})
    for (size_t T : kShapeRows) {
      std::vector<std::vector<float>> v;
      for (size_t j = 0; j < depth; ++j) v.push_back(random_floats(rng, T * kWidth, 1.0 + static_cast<double>(j)));
      const std::string what = at_t("depth_mix of " + std::to_string(depth), T);
      const std::vector<float> y = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
        std::vector<Act> acts;
        for (const auto& vj : v) acts.push_back(upload(be, vj, kWidth, r0, n));
        std::vector<const Act*> ptrs;
        for (const Act& a : acts) ptrs.push_back(&a);
        Act out = be.act(n, kWidth);
        be.depth_mix(ptrs, s, kEps, out);
        return download(be, out);
      }});
      // The definition from the kernels, and float64: alpha_j's score is a
      // canonical dot of the rmsnorm key (within gamma(D + 6) relative per
      // element, ref_rmsnorm) with s: ds_j <= (gamma(D) + gamma(D + 6)) sum |key_i s_i|.
      std::vector<float> want(T * kWidth);
      Ref ref{std::vector<double>(T * kWidth), std::vector<double>(T * kWidth)};
      for (size_t t = 0; t < T; ++t) {
        std::vector<float> alpha(depth), key(kWidth);
        std::vector<double> a64(depth);
        double ds_max = 0;
        for (size_t j = 0; j < depth; ++j) {
          const float* row = v[j].data() + t * kWidth;
          rmsnorm(row, nullptr, kWidth, kEps, key.data());
          alpha[j] = dot(key.data(), s.data(), kWidth);
          double ss = 0;
          for (size_t i = 0; i < kWidth; ++i) ss += static_cast<double>(row[i]) * row[i];
          const double r = 1 / std::sqrt(ss / kWidth + kEps);
          double sc = 0, mag = 0;
          for (size_t i = 0; i < kWidth; ++i) sc += row[i] * r * s[i], mag += std::fabs(row[i] * r * s[i]);
          a64[j] = sc;
          ds_max = std::max(ds_max, (rounding_gamma(canonical_depth(kWidth)) + rounding_gamma(canonical_depth(kWidth) + 6)) * mag);
        }
        softmax(alpha.data(), depth);
        const double m = *std::max_element(a64.begin(), a64.end());
        double total = 0, range = 0;
        for (size_t j = 0; j < depth; ++j) total += std::exp(a64[j] - m), range = std::max(range, m - a64[j]);
        const double bound = softmax_sum_bound(ds_max, range, depth);
        for (size_t i = 0; i < kWidth; ++i) {
          float acc = 0.0f;
          double acc64 = 0, mag = 0;
          for (size_t j = 0; j < depth; ++j) {
            const float vj = v[j][t * kWidth + i];
            acc = acc + alpha[j] * vj;
            const double pj = std::exp(a64[j] - m) / total;
            acc64 += pj * vj, mag += pj * std::fabs(vj);
          }
          want[t * kWidth + i] = acc;
          ref.value[t * kWidth + i] = acc64;
          ref.bound[t * kWidth + i] = bound * mag;
        }
      }
      expect_same_bits(y, want, what + " vs the kernels");
      expect_within(y, ref, what + " vs float64");
    }
}

// ---------------------------------------------------------------------------
// latent_store / attention_latent (MLA's absorbed form)

constexpr size_t kRank = 12, kRope = 5, kLatentWidth = kRank + kRope, kLatentHeads = 3;

TEST(BackendOps, LatentStoreNormsTheLatentAndCopiesKr) {
  constexpr int64_t kStart = 4;
  constexpr float kEps = 1e-6f, kUnwritten = 1234.5f;
  Rng rng(2200);
  const std::vector<float> w = random_floats(rng, kRank);
  for (size_t T : kShapeRows) {
    const size_t positions = kStart + T + 2;
    const std::vector<float> ckv = random_floats(rng, T * kLatentWidth, 2.0);
    const std::vector<float> cache = run_everywhere({at_t("latent_store", T), T, true, [&](Backend& be, size_t r0, size_t n) {
      std::vector<float> rows(positions * kLatentWidth, kUnwritten);
      Act ca = upload(be, ckv, kLatentWidth, r0, n);
      be.latent_store(ca, w, kEps, LatentLayer{rows.data(), kRank, kRope}, kStart + static_cast<int64_t>(r0));
      for (size_t p = 0; p < positions; ++p) {
        const bool written = p >= kStart + r0 && p < kStart + r0 + n;
        if (written) continue;
        for (size_t i = 0; i < kLatentWidth; ++i) EXPECT_EQ(rows[p * kLatentWidth + i], kUnwritten) << "position " << p;
      }
      return rows_of(rows, kLatentWidth, kStart + r0, n);
    }});
    std::vector<float> want(T * kLatentWidth), latent;
    for (size_t t = 0; t < T; ++t) {
      rmsnorm(ckv.data() + t * kLatentWidth, w.data(), kRank, kEps, want.data() + t * kLatentWidth);
      std::copy_n(ckv.data() + t * kLatentWidth + kRank, kRope, want.data() + t * kLatentWidth + kRank);
      latent.insert(latent.end(), ckv.begin() + static_cast<std::ptrdiff_t>(t * kLatentWidth),
                    ckv.begin() + static_cast<std::ptrdiff_t>(t * kLatentWidth + kRank));
    }
    expect_same_bits(cache, want, at_t("latent_store", T) + " vs the kernel");
    const Ref norm = ref_rmsnorm(latent, w, kRank, kEps);
    std::vector<float> got_latent;
    for (size_t t = 0; t < T; ++t)
      got_latent.insert(got_latent.end(), cache.begin() + static_cast<std::ptrdiff_t>(t * kLatentWidth),
                        cache.begin() + static_cast<std::ptrdiff_t>(t * kLatentWidth + kRank));
    expect_within(got_latent, norm, at_t("latent_store", T) + " vs float64");
  }
}

struct LatentCase {
  size_t T = 0, start = 0;
  float scale = 0.25f;
  std::vector<float> q, cache;  // q [T, heads * width]; cache [start + T, width]
};

LatentCase latent_case(size_t T, size_t start, Rng& rng) {
  LatentCase c;
  c.T = T, c.start = start;
  c.q = random_floats(rng, T * kLatentHeads * kLatentWidth, 1.5);
  c.cache = random_floats(rng, (start + T) * kLatentWidth, 1.5);
  return c;
}

// Rows [r0, r0 + n) at positions start + r0 ...; the cache holds every
// position, later ones too, and one more row of large values past the last,
// so a row that reads past its own is caught (and the last reads no further
// than the test's memory).
bool run_latent(Backend& be, const LatentCase& c, size_t r0, size_t n, const std::function<bool()>& stop,
                std::vector<float>& out) {
  std::vector<float> cache = c.cache;
  cache.insert(cache.end(), kLatentWidth, 9.0f);
  Act qa = upload(be, c.q, kLatentHeads * kLatentWidth, r0, n), u = be.act(n, kLatentHeads * kRank);
  const bool done = be.attention_latent(qa, LatentLayer{cache.data(), kRank, kRope},
                                        MlaShape{kLatentHeads, static_cast<int64_t>(c.start + r0), c.scale}, u, stop);
  out = download(be, u);
  return done;
}

TEST(BackendOps, AttentionLatentIsCausalOverTheSharedLatentRows) {
  Rng rng(2300);
  for (size_t T : kShapeRows) {
    const LatentCase c = latent_case(T, 6, rng);
    const std::string what = at_t("attention_latent", T);
    const std::vector<float> u = run_everywhere({what, T, true, [&](Backend& be, size_t r0, size_t n) {
      std::vector<float> o;
      EXPECT_TRUE(run_latent(be, c, r0, n, [] { return false; }, o));
      return o;
    }});
    // The kernels' bits: one ops.h attention() per (row, head) over keys =
    // the whole rows (rank + rope) and values = their first rank floats.
    std::vector<float> want(T * kLatentHeads * kRank), scratch(c.start + T);
    {
      IsaScope scope(Isa::Scalar);
      for (size_t t = 0; t < T; ++t)
        for (size_t h = 0; h < kLatentHeads; ++h)
          attention(c.q.data() + (t * kLatentHeads + h) * kLatentWidth, c.cache.data(), kLatentWidth, c.cache.data(),
                    kLatentWidth, c.start + t + 1, kLatentWidth, kRank, c.scale, scratch.data(),
                    want.data() + (t * kLatentHeads + h) * kRank);
    }
    expect_same_bits(u, want, what + " vs the kernel");
    // float64, ref_attention's bound with dk = rank + rope, dv = rank.
    Ref ref;
    for (size_t t = 0; t < T; ++t)
      for (size_t h = 0; h < kLatentHeads; ++h) {
        const size_t n = c.start + t + 1;
        const float* q = c.q.data() + (t * kLatentHeads + h) * kLatentWidth;
        std::vector<double> sc(n);
        double ds_max = 0;
        for (size_t j = 0; j < n; ++j) {
          double d = 0, mag = 0;
          for (size_t i = 0; i < kLatentWidth; ++i) {
            const double p = static_cast<double>(q[i]) * c.cache[j * kLatentWidth + i];
            d += p, mag += std::fabs(p);
          }
          sc[j] = d * c.scale;
          ds_max = std::max(ds_max, rounding_gamma(canonical_depth(kLatentWidth) + 1) * mag * c.scale);
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        double total = 0, range = 0;
        for (size_t j = 0; j < n; ++j) total += std::exp(sc[j] - m), range = std::max(range, m - sc[j]);
        const double bound = softmax_sum_bound(ds_max, range, n);
        for (size_t i = 0; i < kRank; ++i) {
          double o = 0, mag = 0;
          for (size_t j = 0; j < n; ++j) {
            const double p = std::exp(sc[j] - m) / total, v = c.cache[j * kLatentWidth + i];
            o += p * v, mag += p * std::fabs(v);
          }
          ref.value.push_back(o);
          ref.bound.push_back(bound * mag);
        }
      }
    expect_within(u, ref, what + " vs float64");
  }
}

// Asked before every kLatentStopRows cached rows of each of a row's two
// sweeps: a row over 1,101 positions asks twice per sweep.
TEST(BackendOps, AttentionLatentStopIsAskedPerBlockOfCacheRowsAndAbandons) {
  Rng rng(2400);
  const size_t start = Backend::kLatentStopRows + 76;
  const LatentCase c = latent_case(2, start, rng);
  for_each_backend([&](Instance& inst, const std::string& where) {
    Backend& be = *inst.backend;
    std::vector<float> out, full;
    size_t asked = 0;
    EXPECT_TRUE(run_latent(be, c, 0, 2, [&] { return ++asked, false; }, full)) << where;
    EXPECT_EQ(asked, 8u) << where;  // 2 rows x 2 sweeps x 2 blocks
    asked = 0;
    EXPECT_FALSE(run_latent(be, c, 0, 2, [&] { return ++asked == 3; }, out)) << where;
    EXPECT_EQ(asked, 3u) << where;
    std::vector<float> unstopped;
    EXPECT_TRUE(run_latent(be, c, 0, 2, nullptr, unstopped)) << where;
    expect_same_bits(unstopped, full, where + ": no stop vs a stop that never abandons");
  });
}

// ---------------------------------------------------------------------------
// kda_recurrence / kda_replay

constexpr size_t kKdaHeads = 2, kKdaDim = 8, kKdaWidth = kKdaHeads * kKdaDim, kKdaKernel = 4;

struct KdaCase {
  size_t T = 0;
  std::vector<float> q, k, v, gate, r, b;  // [T, width] each, b [T, heads]
  std::vector<float> q_conv, k_conv, v_conv, a_log, dt_bias, o_norm;
  std::vector<float> conv_q, conv_k, conv_v, recurrent;  // the state before the rows
  KdaParams params() const {
    KdaParams p;
    p.heads = kKdaHeads, p.head_dim = kKdaDim, p.kernel = kKdaKernel;
    p.q_conv = q_conv, p.k_conv = k_conv, p.v_conv = v_conv, p.a_log = a_log, p.dt_bias = dt_bias, p.o_norm = o_norm;
    p.eps = 1e-6f, p.lower = -5.0f, p.q_scale = 0.35355339f;
    return p;
  }
};

KdaCase kda_case(size_t T, Rng& rng) {
  KdaCase c;
  c.T = T;
  for (auto* x : {&c.q, &c.k, &c.v, &c.gate, &c.r}) *x = random_floats(rng, T * kKdaWidth);
  c.b = random_floats(rng, T * kKdaHeads, 2.0);
  for (auto* w : {&c.q_conv, &c.k_conv, &c.v_conv}) *w = random_floats(rng, kKdaWidth * kKdaKernel, 0.5);
  c.a_log = random_floats(rng, kKdaDim, 0.5);
  c.dt_bias = random_floats(rng, kKdaWidth, 0.5);
  c.o_norm = random_floats(rng, kKdaDim);
  for (auto* s : {&c.conv_q, &c.conv_k, &c.conv_v}) *s = random_floats(rng, kKdaWidth * kKdaKernel);
  c.recurrent = random_floats(rng, kKdaHeads * kKdaDim * kKdaDim, 0.3);
  return c;
}

struct KdaRun {
  std::vector<float> o, state;  // state: the four parts after the rows, concatenated
  std::vector<float> trace;     // the eight trace arrays, concatenated
};

// Rows [r0, r0 + n) from the state `state` (updated in place).
std::vector<float> kda_rows(Backend& be, const KdaCase& c, size_t r0, size_t n, std::vector<std::vector<float>>& state,
                            std::vector<std::vector<float>>* trace) {
  Act q = upload(be, c.q, kKdaWidth, r0, n), k = upload(be, c.k, kKdaWidth, r0, n), v = upload(be, c.v, kKdaWidth, r0, n);
  Act g = upload(be, c.gate, kKdaWidth, r0, n), r = upload(be, c.r, kKdaWidth, r0, n), b = upload(be, c.b, kKdaHeads, r0, n);
  Act o = be.act(n, kKdaWidth);
  KdaTrace tr;
  if (trace) {
    trace->assign(8, std::vector<float>(n * kKdaWidth));
    (*trace)[7].resize(n * kKdaHeads);
    tr = KdaTrace{(*trace)[0].data(), (*trace)[1].data(), (*trace)[2].data(), (*trace)[3].data(),
                  (*trace)[4].data(), (*trace)[5].data(), (*trace)[6].data(), (*trace)[7].data()};
  }
  be.kda_recurrence(q, k, v, g, r, b, c.params(), KdaLayerState{state[0].data(), state[1].data(), state[2].data(), state[3].data()},
                    trace ? &tr : nullptr, o);
  return download(be, o);
}

std::vector<std::vector<float>> initial_state(const KdaCase& c) { return {c.conv_q, c.conv_k, c.conv_v, c.recurrent}; }

std::vector<float> concat(const std::vector<std::vector<float>>& parts) {
  std::vector<float> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

// The definition in float64, from the same state: the short convolution
// (silu of the window's weighted sum), l2-normalized heads, the decay gate,
// the delta rule, the head rmsnorm and the sigmoid gate.
std::vector<double> kda_reference(const KdaCase& c) {
  const KdaParams p = c.params();
  std::vector<double> cq(c.conv_q.begin(), c.conv_q.end()), ck(c.conv_k.begin(), c.conv_k.end()),
      cv(c.conv_v.begin(), c.conv_v.end()), S(c.recurrent.begin(), c.recurrent.end()), out;
  auto conv = [&](const std::vector<float>& x, const std::vector<float>& w, std::vector<double>& st, size_t t) {
    std::vector<double> y(kKdaWidth);
    for (size_t ch = 0; ch < kKdaWidth; ++ch) {
      double* s = st.data() + ch * kKdaKernel;
      for (size_t i = 0; i + 1 < kKdaKernel; ++i) s[i] = s[i + 1];
      s[kKdaKernel - 1] = x[t * kKdaWidth + ch];
      double acc = 0;
      for (size_t i = 0; i < kKdaKernel; ++i) acc += w[ch * kKdaKernel + i] * s[i];
      y[ch] = acc * sigmoid64(acc);
    }
    return y;
  };
  for (size_t t = 0; t < c.T; ++t) {
    std::vector<double> q = conv(c.q, c.q_conv, cq, t), k = conv(c.k, c.k_conv, ck, t), v = conv(c.v, c.v_conv, cv, t);
    for (size_t h = 0; h < kKdaHeads; ++h)
      for (std::vector<double>* x : {&q, &k}) {
        double n2 = 0;
        for (size_t i = 0; i < kKdaDim; ++i) n2 += (*x)[h * kKdaDim + i] * (*x)[h * kKdaDim + i];
        const double n = std::max(std::sqrt(n2), 1e-12);
        for (size_t i = 0; i < kKdaDim; ++i) (*x)[h * kKdaDim + i] /= n;
      }
    for (double& x : q) x *= p.q_scale;
    for (size_t h = 0; h < kKdaHeads; ++h) {
      double* s = S.data() + h * kKdaDim * kKdaDim;
      const double beta = sigmoid64(c.b[t * kKdaHeads + h]);
      const double* qh = q.data() + h * kKdaDim;
      const double* kh = k.data() + h * kKdaDim;
      const double* vh = v.data() + h * kKdaDim;
      for (size_t a = 0; a < kKdaDim; ++a) {
        const size_t i = h * kKdaDim + a;
        const double g = p.lower * sigmoid64(std::exp(static_cast<double>(c.a_log[a])) * (c.r[t * kKdaWidth + i] + static_cast<double>(c.dt_bias[i])));
        for (size_t j = 0; j < kKdaDim; ++j) s[a * kKdaDim + j] *= std::exp(g);
      }
      std::vector<double> delta(kKdaDim), o(kKdaDim);
      for (size_t j = 0; j < kKdaDim; ++j) {
        double kv = 0;
        for (size_t a = 0; a < kKdaDim; ++a) kv += kh[a] * s[a * kKdaDim + j];
        delta[j] = vh[j] - kv;
      }
      for (size_t a = 0; a < kKdaDim; ++a)
        for (size_t j = 0; j < kKdaDim; ++j) s[a * kKdaDim + j] += beta * kh[a] * delta[j];
      double ss = 0;
      for (size_t j = 0; j < kKdaDim; ++j) {
        for (size_t a = 0; a < kKdaDim; ++a) o[j] += qh[a] * s[a * kKdaDim + j];
        ss += o[j] * o[j];
      }
      const double rn = 1 / std::sqrt(ss / kKdaDim + p.eps);
      for (size_t j = 0; j < kKdaDim; ++j)
        out.push_back(o[j] * rn * c.o_norm[j] * sigmoid64(c.gate[t * kKdaWidth + h * kKdaDim + j]));
    }
  }
  return out;
}

// The recurrence carries state from row to row, so rows are not independent:
// instead T rows in one call must equal the same rows in one-row calls that
// pass the state on (the exactness contract), outputs and final state alike.
TEST(BackendOps, KdaRecurrenceStepsRowByRowWithItsState) {
  Rng rng(2500);
  for (size_t T : kShapeRows) {
    const KdaCase c = kda_case(T, rng);
    const std::string what = at_t("kda_recurrence", T);
    const std::vector<float> all = run_everywhere({what, T, false, [&](Backend& be, size_t r0, size_t n) {
      std::vector<std::vector<float>> state = initial_state(c);
      std::vector<float> o = kda_rows(be, c, r0, n, state, nullptr);
      const std::vector<float> s = concat(state);
      o.insert(o.end(), s.begin(), s.end());
      return o;
    }});
    const std::vector<float> stepped = run_everywhere({what + " one row at a time", T, false, [&](Backend& be, size_t, size_t) {
      std::vector<std::vector<float>> state = initial_state(c);
      std::vector<float> o;
      for (size_t t = 0; t < T; ++t) {
        const std::vector<float> ot = kda_rows(be, c, t, 1, state, nullptr);
        o.insert(o.end(), ot.begin(), ot.end());
      }
      const std::vector<float> s = concat(state);
      o.insert(o.end(), s.begin(), s.end());
      return o;
    }});
    expect_same_bits(stepped, all, what + ": one call vs one row per call");
    // The kernels' bits, composed as the definition says (scalar path).
    std::vector<float> want;
    {
      IsaScope scope(Isa::Scalar);
      const KdaParams p = c.params();
      std::vector<std::vector<float>> st = initial_state(c);
      std::vector<float> qc(kKdaWidth), kc(kKdaWidth), vc(kKdaWidth), g(kKdaWidth), o(kKdaWidth);
      for (size_t t = 0; t < T; ++t) {
        short_conv_step(c.q.data() + t * kKdaWidth, c.q_conv.data(), st[0].data(), kKdaWidth, kKdaKernel, qc.data());
        short_conv_step(c.k.data() + t * kKdaWidth, c.k_conv.data(), st[1].data(), kKdaWidth, kKdaKernel, kc.data());
        short_conv_step(c.v.data() + t * kKdaWidth, c.v_conv.data(), st[2].data(), kKdaWidth, kKdaKernel, vc.data());
        for (size_t h = 0; h < kKdaHeads; ++h) {
          l2_normalize(qc.data() + h * kKdaDim, kKdaDim, 1e-12f);
          l2_normalize(kc.data() + h * kKdaDim, kKdaDim, 1e-12f);
        }
        for (float& x : qc) x = x * p.q_scale;
        for (size_t i = 0; i < kKdaWidth; ++i)
          g[i] = p.lower * sigmoid(portable_expf(c.a_log[i % kKdaDim]) * (c.r[t * kKdaWidth + i] + c.dt_bias[i]));
        for (size_t h = 0; h < kKdaHeads; ++h) {
          float* oh = o.data() + h * kKdaDim;
          kda_step(st[3].data() + h * kKdaDim * kKdaDim, qc.data() + h * kKdaDim, kc.data() + h * kKdaDim,
                   vc.data() + h * kKdaDim, g.data() + h * kKdaDim, sigmoid(c.b[t * kKdaHeads + h]), kKdaDim, kKdaDim, oh);
          rmsnorm(oh, c.o_norm.data(), kKdaDim, p.eps, oh);
          for (size_t j = 0; j < kKdaDim; ++j) oh[j] = oh[j] * sigmoid(c.gate[t * kKdaWidth + h * kKdaDim + j]);
        }
        want.insert(want.end(), o.begin(), o.end());
      }
      const std::vector<float> s = concat(st);
      want.insert(want.end(), s.begin(), s.end());
    }
    expect_same_bits(all, want, what + " vs the kernels");
    // float64: the recurrence compounds roundings over the steps (the decay
    // and the normalized keys keep the state bounded); this checks the
    // definition (a wrong step, order or gate moves outputs by O(1)) with a
    // loose bound of 2^-12 of each output's magnitude plus 2^-16: ~250 u,
    // far above the rounding of a few hundred short steps.
    const std::vector<double> ref64 = kda_reference(c);
    Ref ref;
    for (double x : ref64) ref.value.push_back(x), ref.bound.push_back(0x1p-12 * std::fabs(x) + 0x1p-16);
    expect_within(std::vector<float>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(T * kKdaWidth)), ref,
                  what + " vs float64");
  }
}

// The trace holds what the recurrence consumed, and stepping the state
// before the rows again over its first m rows gives the state the
// recurrence reached after m rows, bit for bit.
TEST(BackendOps, KdaReplayOfTheTraceReachesTheSameState) {
  Rng rng(2600);
  const KdaCase c = kda_case(kLongT, rng);
  for (size_t m : {size_t{0}, size_t{1}, size_t{70}, kLongT}) {
    const std::string what = "kda_replay of " + std::to_string(m) + " rows";
    run_everywhere({what, 1, false, [&](Backend& be, size_t, size_t) {
      std::vector<std::vector<float>> state = initial_state(c), trace;
      kda_rows(be, c, 0, kLongT, state, &trace);
      expect_same_bits(trace[0], c.q, what + ": raw q");
      expect_same_bits(trace[2], c.v, what + ": raw v");
      std::vector<std::vector<float>> after_m = initial_state(c);
      if (m > 0) kda_rows(be, c, 0, m, after_m, nullptr);
      std::vector<std::vector<float>> replayed = initial_state(c);
      const KdaSteps steps{trace[0].data(), trace[1].data(), trace[2].data(), trace[3].data(),
                           trace[4].data(), trace[5].data(), trace[6].data(), trace[7].data()};
      be.kda_replay(c.params(), KdaLayerState{replayed[0].data(), replayed[1].data(), replayed[2].data(), replayed[3].data()},
                    steps, m);
      expect_same_bits(concat(replayed), concat(after_m), what);
      return concat(replayed);
    }});
  }
}

// The new ops' shape errors name the op, on every backend.
TEST(BackendOps, ShapeErrorsOfTheK3OpsNameTheOp) {
  Rng rng(2700);
  const KdaCase c = kda_case(2, rng);
  for_each_backend([&](Instance& inst, const std::string& where) {
    SCOPED_TRACE(where);
    Backend& be = *inst.backend;
    Act x = be.act(3, kWidth), narrow = be.act(3, kWidth - 1), two = be.act(2, kWidth);
    EXPECT_FAILS_WITH(be.place_rows(x, 1, x), "place_rows");
    EXPECT_FAILS_WITH(be.place_rows(x, 0, narrow), "place_rows");
    EXPECT_FAILS_WITH(be.copy_cols(x, 60, 11, narrow, 0), "copy_cols");
    EXPECT_FAILS_WITH(be.copy_cols(x, 0, 10, two, 0), "copy_cols");
    EXPECT_FAILS_WITH(be.round_bf16(x, narrow, 0), "round_bf16");
    EXPECT_FAILS_WITH(be.mul_sigmoid(x, narrow), "mul_sigmoid");
    const std::vector<float> s(kWidth);
    const Act* values[] = {&x, &narrow};
    EXPECT_FAILS_WITH(be.depth_mix(values, s, 1e-6f, x), "depth_mix");
    EXPECT_FAILS_WITH(be.depth_mix({}, s, 1e-6f, x), "depth_mix");
    const Act* one[] = {&x};
    EXPECT_FAILS_WITH(be.depth_mix(one, std::span<const float>(s).first(5), 1e-6f, x), "depth_mix");
    std::vector<float> rows(8 * kLatentWidth);
    Act ckv = be.act(2, kLatentWidth), bad_ckv = be.act(2, kLatentWidth + 1);
    EXPECT_FAILS_WITH(be.latent_store(bad_ckv, std::vector<float>(kRank), 1e-6f, LatentLayer{rows.data(), kRank, kRope}, 0), "latent_store");
    EXPECT_FAILS_WITH(be.latent_store(ckv, std::vector<float>(kRank - 1), 1e-6f, LatentLayer{rows.data(), kRank, kRope}, 0), "latent_store");
    EXPECT_FAILS_WITH(be.latent_store(ckv, std::vector<float>(kRank), 1e-6f, LatentLayer{rows.data(), kRank, kRope}, -1), "latent_store");
    Act q = be.act(1, kLatentHeads * kLatentWidth), u = be.act(1, kLatentHeads * kRank);
    const LatentLayer latent{rows.data(), kRank, kRope};
    EXPECT_FAILS_WITH(be.attention_latent(x, latent, MlaShape{kLatentHeads, 0, 1.0f}, u, nullptr), "attention_latent");
    EXPECT_FAILS_WITH(be.attention_latent(q, latent, MlaShape{kLatentHeads, 0, 1.0f}, x, nullptr), "attention_latent");
    EXPECT_FAILS_WITH(be.attention_latent(q, latent, MlaShape{kLatentHeads, -1, 1.0f}, u, nullptr), "attention_latent");
    std::vector<std::vector<float>> st = initial_state(c);
    const KdaLayerState state{st[0].data(), st[1].data(), st[2].data(), st[3].data()};
    Act a = be.act(2, kKdaWidth), b = be.act(2, kKdaHeads), o = be.act(2, kKdaWidth), wide = be.act(2, kKdaWidth + 1);
    EXPECT_FAILS_WITH(be.kda_recurrence(a, a, wide, a, a, b, c.params(), state, nullptr, o), "kda_recurrence");
    EXPECT_FAILS_WITH(be.kda_recurrence(a, a, a, a, a, a, c.params(), state, nullptr, o), "kda_recurrence");
    KdaParams short_bias = c.params();
    short_bias.dt_bias = short_bias.dt_bias.first(3);
    EXPECT_FAILS_WITH(be.kda_recurrence(a, a, a, a, a, b, short_bias, state, nullptr, o), "kda_recurrence");
    KdaParams short_conv = c.params();
    short_conv.k_conv = short_conv.k_conv.first(3);
    EXPECT_FAILS_WITH(be.kda_replay(short_conv, state, KdaSteps{}, 0), "kda_replay");
  });
}

}  // namespace
