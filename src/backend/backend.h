// The compute-backend interface: where a forward pass's activations live and
// what runs the ops on them. Family code (src/model/<family>/) holds
// activations only as Acts and computes only through a Backend, so a family
// never sees a host pointer into its activations, a thread pool or a kernel
// table; the CPU backend (backend/cpu_backend.h) is today's kernels and
// thread pool behind it, and a device backend is one more implementation.
//
// The contract every backend keeps (design.md §5): each op's result is bit
// for bit the kernels' canonical one (kernels/matmul.h, kernels/ops.h),
// whatever the thread count or ISA path, and independent of how many rows an
// op is given, so a T-row pass still equals T one-row passes. The
// backend-ops test (tests/backend) checks every op on every backend against
// the scalar path (equal bits) and a float64 reference (a tolerance).
//
// Ready for an asynchronous device (docs/architecture.md, "Adding a
// backend"): ops are issued in program order and may complete later; the
// only points where the host sees values are read() and the routing read
// of the routed-experts block, which wait for what came before. Acts are the
// backend's buffers (device memory on a GPU), taken from and returned to a
// pool it owns, so a pass of the same shape as the last allocates nothing.
// Weights arrive as WeightViews of host memory (resident spine matrices and
// expert records as the expert source hands them over); a device backend
// decides whether to copy them (a spine uploaded once, keyed by its data
// pointer; an expert record staged per use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "kernels/weights.h"

namespace deltafin {

class Backend;

// Activations: rows x width fp32 values, row-major, owned by a backend.
// Move-only; the storage goes back to the backend's pool when the Act dies.
// A new Act's values are unspecified until an op or write() fills them.
class Act {
public:
  Act() = default;
  Act(Act&& other) noexcept { *this = std::move(other); }
  Act& operator=(Act&& other) noexcept;
  Act(const Act&) = delete;
  Act& operator=(const Act&) = delete;
  ~Act() { reset(); }

  size_t rows() const { return rows_; }
  size_t width() const { return width_; }
  size_t size() const { return rows_ * width_; }
  bool empty() const { return owner_ == nullptr; }
  void reset();  // gives the storage back now

private:
  friend class Backend;
  Backend* owner_ = nullptr;
  uint32_t slot_ = 0;
  void* storage_ = nullptr;  // the backend's handle on the values (CPU: the floats)
  size_t rows_ = 0, width_ = 0;
};

// The elementwise activation of a gated MLP, applied to (g, u) = (gate x, up x).
struct Gate {
  enum class Kind { SiluMul, SiTU };
  Kind kind = Kind::SiluMul;  // silu(g) * u (SwiGLU: Qwen3, DeepSeek, ...)
  float beta = 0, beta_lin = 0;  // SiTU (k3-model.md §7.6): tanh-bounded, K3's experts
  static Gate silu_mul() { return {}; }
  static Gate situ(float beta, float beta_lin) { return {Kind::SiTU, beta, beta_lin}; }
};

// One layer of a grouped-query K/V cache as the session holds it: position
// p's keys at keys + p * stride (kv_heads x head_dim floats), values alike.
// Host memory for the CPU backend; a device backend holds its caches as its
// own buffers (docs/architecture.md).
struct KvLayer {
  float* keys = nullptr;
  float* values = nullptr;
  size_t stride = 0;
};

// Grouped-query causal attention of rows at positions start ... start + T - 1
// over a KvLayer that already holds their keys and values.
struct GqaShape {
  size_t heads = 0, kv_heads = 0, head_dim = 0;
  int64_t start = 0;
  float scale = 0;
};

// One layer of a latent (MLA) cache as the session holds it: position p's
// row at rows + p * (rank + rope), the normed latent c (rank floats) then k_r
// (rope floats). Host memory for the CPU backend, like KvLayer.
struct LatentLayer {
  float* rows = nullptr;
  size_t rank = 0, rope = 0;
  size_t width() const { return rank + rope; }
};

// Latent attention of rows at positions start ... start + T - 1: each row
// holds `heads` absorbed queries of rank + rope floats.
struct MlaShape {
  size_t heads = 0;
  int64_t start = 0;
  float scale = 0;
};

// One KDA layer's recurrent state as the session holds it (host memory for
// the CPU backend, like KvLayer): the short convolutions' windows of q, k, v
// ([heads * head_dim, kernel] each) and the per-head state [heads, K, K].
struct KdaLayerState {
  float* conv_q = nullptr;
  float* conv_k = nullptr;
  float* conv_v = nullptr;
  float* recurrent = nullptr;
};

// A KDA layer's weights and constants for the recurrence (k3-model.md §7.5).
struct KdaParams {
  size_t heads = 0, head_dim = 0, kernel = 0;
  std::span<const float> q_conv, k_conv, v_conv;  // [heads * head_dim, kernel] each
  std::span<const float> a_log;                   // [head_dim], shared by the heads
  std::span<const float> dt_bias;                 // [heads * head_dim]
  std::span<const float> o_norm;                  // [head_dim]
  float eps = 0, lower = 0, q_scale = 0;
};

// Host arrays the KDA op fills for speculative verification (null: no
// trace): what the recurrence consumed, row-major over the op's T rows:
// raw_q/k/v the projections before the convolution, q, k, v, g the step
// inputs ([T, heads * head_dim] each), beta [T, heads].
struct KdaTrace {
  float *raw_q = nullptr, *raw_k = nullptr, *raw_v = nullptr;
  float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
};

// The same arrays, read back to step a state again (Backend::kda_replay).
struct KdaSteps {
  const float *raw_q = nullptr, *raw_k = nullptr, *raw_v = nullptr;
  const float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // A buffer of rows x width from the pool (no allocation once the pool has
  // served a pass of this shape). Safe to call from several threads (the
  // experts of a group run on the threads).
  Act act(size_t rows, size_t width);

  // Host <-> backend: values of rows [row0, row0 + host.size() / width).
  // read() waits for every op issued before it.
  virtual void write(Act& dst, size_t row0, std::span<const float> host) = 0;
  virtual void read(const Act& src, size_t row0, std::span<float> host) = 0;
  virtual void copy(const Act& src, Act& dst) = 0;  // dst = src (same shape)
  // dst = rows [first, first + dst.rows()) of src (same width).
  virtual void copy_rows(const Act& src, size_t first, Act& dst) = 0;
  // Rows [first, first + src.rows()) of dst = src (same width): copy_rows' inverse.
  virtual void place_rows(const Act& src, size_t first, Act& dst) = 0;
  // For every row t (same row count): dst[t][dst_col + i] = src[t][src_col + i],
  // i < n: a block of columns (a head of a row) moved between Acts.
  virtual void copy_cols(const Act& src, size_t src_col, size_t n, Act& dst, size_t dst_col) = 0;
  // dst[t][dst_col + i] = src[t][i] rounded to BF16 (nearest even) and
  // widened back, for every row t and i < src.width().
  virtual void round_bf16(const Act& src, Act& dst, size_t dst_col) = 0;

  // out[t] = table row ids[t], widened (BF16) or as stored (F32): an embedding lookup.
  virtual void embed(const WeightView& table, std::span<const uint32_t> ids, Act& out) = 0;
  // y = x W^T per row (kernels/matmul.h): y is [x.rows, w.rows].
  virtual void matmul(const WeightView& w, const Act& x, Act& y) = 0;
  // h = gate_fn(gate x, up x) per element: the products in one hand-off of
  // the threads, the activation on each thread's rows as they finish.
  virtual void gated_matmul(const WeightView& gate, const WeightView& up, const Act& x, Gate fn, Act& h) = 0;
  // y = rmsnorm(x) per row with weight w (empty: none). y may be x.
  virtual void rmsnorm(const Act& x, std::span<const float> w, float eps, Act& y) = 0;
  // In place, each head_dim-wide head of every row: rmsnorm (QK-norm).
  virtual void rmsnorm_heads(Act& x, std::span<const float> w, size_t head_dim, float eps) = 0;
  // In place, each head of row t: rotate-half RoPE (pairs i, i + head_dim/2)
  // with cos and sin [rows, head_dim / 2].
  virtual void rope_half(Act& x, size_t head_dim, const Act& cos, const Act& sin) = 0;
  // In place, each head of row t: interleaved RoPE as DeepSeek's MLA
  // (Hugging Face's rope_interleave): the head is first de-interleaved,
  // [x0, x2, x4, ... | x1, x3, x5, ...], then rotated as rope_half, so pair
  // (x[2i], x[2i+1]) turns by angle i and lands at (i, i + head_dim/2).
  virtual void rope_pairs(Act& x, size_t head_dim, const Act& cos, const Act& sin) = 0;
  virtual void add(Act& x, const Act& d) = 0;  // x = x + d, elementwise
  // x = x * sigmoid(g), elementwise (kernels/ops.h sigmoid): a sigmoid gate.
  virtual void mul_sigmoid(Act& x, const Act& g) = 0;
  // A mix over depth (K3's AttnRes, k3-model.md §7.2), per row t, with
  // v_j = values[j] row t (every value [rows, width] of out): alpha_j =
  // dot(rmsnorm(v_j, no weight, eps), s) (canonical dot), alpha =
  // softmax(alpha) (kernels/ops.h), then out = sum_j alpha_j v_j from 0 in
  // ascending j, each product rounded then added.
  virtual void depth_mix(std::span<const Act* const> values, std::span<const float> s, float eps, Act& out) = 0;
  // out[r] = sum over i of y[r * k + i] * w[r * k + i] in i order (each
  // product rounded, then added, from 0): the routed combine. y: [rows * k, width].
  virtual void weighted_sum(const Act& y, std::span<const float> w, size_t k, Act& out) = 0;
  // dst[j] = src[rows[j]] / dst[rows[j]] = src[j] for every j.
  virtual void gather(const Act& src, std::span<const uint32_t> rows, Act& dst) = 0;
  virtual void scatter(const Act& src, std::span<const uint32_t> rows, Act& dst) = 0;

  // Stores rows of k and v ([T, kv_width]) at positions start ... of `cache`.
  virtual void kv_store(const Act& k, const Act& v, KvLayer cache, int64_t start) = 0;
  // out [T, heads * head_dim]: each (row, head) attends causally over the
  // cache (query head h reads kv head h / (heads / kv_heads)). `stop`, when
  // set, is asked between blocks of kAttentionStopRows rows; true abandons
  // the op (returns false, out unspecified).
  static constexpr size_t kAttentionStopRows = 64;
  virtual bool attention_gqa(const Act& q, KvLayer cache, const GqaShape& shape, Act& out,
                             const std::function<bool()>& stop) = 0;

  // Stores rows of ckv ([T, rank + rope]) at positions start ... of `cache`:
  // row = [rmsnorm(ckv[:rank], w, eps) || ckv[rank:]] (MLA's latent and k_r).
  virtual void latent_store(const Act& ckv, std::span<const float> w, float eps, LatentLayer cache, int64_t start) = 0;
  // u [T, heads * rank]: for row t (position start + t) and head h, over the
  // cached positions j = 0 ... start + t: score_j = dot(q[t][h], row_j)
  // (canonical, over rank + rope) * scale; p = softmax(score); u[t][h] =
  // sum_j p_j c_j (c_j the first rank floats of row_j) from 0 in ascending j,
  // each product rounded then added (kernels/ops.h axpy). `stop`, when set,
  // is asked before every kLatentStopRows cached rows of each of a row's two
  // sweeps (scores, sums), first at j = 0; true abandons the op (returns
  // false, u unspecified).
  static constexpr size_t kLatentStopRows = 1024;
  virtual bool attention_latent(const Act& q, LatentLayer cache, const MlaShape& shape, Act& u,
                                const std::function<bool()>& stop) = 0;

  // The recurrence of a KDA layer (k3-model.md §7.5 steps 2-8) over T rows in
  // position order, from q, k, v, gate, r ([T, heads * head_dim] each: the
  // projections, r the decay's low-rank projection) and b ([T, heads]). Per
  // row: qc, kc, vc = short_conv_step of q, k, v (updating the windows);
  // each head of qc and kc l2-normalized (floor 1e-12); qc *= q_scale;
  // g[h, c] = lower * sigmoid(expf(a_log[c]) * (r[h, c] + dt_bias[h, c]));
  // per head: beta = sigmoid(b[h]), o_h = kda_step(state_h, qc_h, kc_h, vc_h,
  // g_h, beta), o_h = rmsnorm(o_h, o_norm, eps), o_h[c] *= sigmoid(gate[h, c]).
  // o is [T, heads * head_dim]; `trace` (may be null) receives the inputs.
  virtual void kda_recurrence(const Act& q, const Act& k, const Act& v, const Act& gate, const Act& r, const Act& b,
                              const KdaParams& p, KdaLayerState state, const KdaTrace* trace, Act& o) = 0;

  // Steps `state` over the first `rows` rows of a trace as kda_recurrence
  // did: per row, the three windows move with short_conv_step of raw_q/k/v,
  // then each head's kda_step with the traced q, k, v, g, beta (outputs
  // dropped). Speculative verification's rollback: the same inputs through
  // the same kernels give the same state bit for bit. Uses p's shape and
  // convolution weights only.
  virtual void kda_replay(const KdaParams& p, KdaLayerState state, const KdaSteps& steps, size_t rows) = 0;

  // Runs compute(j) for each expert j of a ready group, as the backend
  // spreads work (CPU: whole experts on the threads when that balances,
  // backend/expert_group.h); each compute may issue ops of its own.
  virtual void run_experts(std::span<const size_t> rows_per_expert, const std::function<void(size_t j)>& compute) = 0;

protected:
  // The pool: storage of at least `floats` values (a slot number and the
  // backend's handle on it, stable while the slot is out), and back.
  struct Slot {
    uint32_t index = 0;
    void* storage = nullptr;
  };
  virtual Slot acquire(size_t floats) = 0;
  virtual void release(uint32_t slot) = 0;
  static void* storage_of(const Act& a) { return a.storage_; }

  friend class Act;
};

}  // namespace deltafin
