#include "backend/cpu_backend.h"

#include "backend/act_size_class.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/portable_math.h"
#include "backend/expert_group.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

void check_shape(const Act& a, size_t rows, size_t width, const char* op, const char* what) {
  if (a.empty() || a.rows() != rows || a.width() != width)
    fail("cpu backend: ", op, ": ", what, " is [", a.rows(), ", ", a.width(), "], expected [", rows, ", ", width, "]");
}

// Rotate-half RoPE on one head in place: pairs (i, i + half), as Hugging
// Face's rotate_half: out_lo = x_lo*cos - x_hi*sin, out_hi = x_hi*cos + x_lo*sin.
void rope_head(float* x, const float* cos_p, const float* sin_p, size_t half) {
  for (size_t i = 0; i < half; ++i) {
    const float lo = x[i], hi = x[i + half];
    x[i] = lo * cos_p[i] - hi * sin_p[i];
    x[i + half] = hi * cos_p[i] + lo * sin_p[i];
  }
}

}  // namespace

namespace {

// This thread's number, for its own free lists (threads are few: the pool's
// and the callers').
size_t thread_number() {
  static std::atomic<size_t> next{0};
  thread_local const size_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

}  // namespace

// A thread takes back the slots it gave back (their lines are still in its
// core's cache), and another thread's free slot of the class only when it
// has none: with one shared list, the experts computed at once on two
// threads traded their buffers every layer, and each trade moved the
// buffers' cache lines between cores.
Backend::Slot CpuBackend::acquire(size_t floats) {
  const size_t cls = act_size_class(floats), me = thread_number();
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() <= me) free_.resize(me + 1);
  std::vector<uint32_t>* free = &free_[me][cls];
  for (size_t t = 0; free->empty() && t < free_.size(); ++t) {
    auto it = free_[t].find(cls);
    if (it != free_[t].end() && !it->second.empty()) free = &it->second;
  }
  uint32_t index;
  if (!free->empty()) {
    index = free->back();
    free->pop_back();
  } else {
    index = static_cast<uint32_t>(slots_.size());
    slots_.push_back(std::make_unique<std::vector<float>>(cls));
    class_of_.push_back(cls);
  }
  return {index, slots_[index]->data()};
}

void CpuBackend::release(uint32_t slot) {
  const size_t me = thread_number();
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() <= me) free_.resize(me + 1);
  free_[me][class_of_[slot]].push_back(slot);
}

size_t CpuBackend::slots_made() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

void CpuBackend::write(Act& dst, size_t row0, std::span<const float> host) {
  if (dst.width() == 0 || host.size() % dst.width() != 0 || row0 * dst.width() + host.size() > dst.size())
    fail("cpu backend: write of ", host.size(), " values at row ", row0, " into [", dst.rows(), ", ", dst.width(), "]");
  std::copy(host.begin(), host.end(), data(dst) + row0 * dst.width());
}

void CpuBackend::read(const Act& src, size_t row0, std::span<float> host) {
  if (src.width() == 0 || host.size() % src.width() != 0 || row0 * src.width() + host.size() > src.size())
    fail("cpu backend: read of ", host.size(), " values at row ", row0, " from [", src.rows(), ", ", src.width(), "]");
  std::copy_n(data(src) + row0 * src.width(), host.size(), host.begin());
}

void CpuBackend::copy(const Act& src, Act& dst) {
  check_shape(dst, src.rows(), src.width(), "copy", "dst");
  std::copy_n(data(src), src.size(), data(dst));
}

void CpuBackend::copy_rows(const Act& src, size_t first, Act& dst) {
  if (dst.width() != src.width() || first + dst.rows() > src.rows())
    fail("cpu backend: copy_rows: [", dst.rows(), ", ", dst.width(), "] from row ", first, " of [", src.rows(), ", ",
         src.width(), "]");
  std::copy_n(data(src) + first * src.width(), dst.size(), data(dst));
}

void CpuBackend::place_rows(const Act& src, size_t first, Act& dst) {
  if (dst.width() != src.width() || first + src.rows() > dst.rows())
    fail("cpu backend: place_rows: [", src.rows(), ", ", src.width(), "] at row ", first, " of [", dst.rows(), ", ",
         dst.width(), "]");
  std::copy_n(data(src), src.size(), data(dst) + first * dst.width());
}

void CpuBackend::copy_cols(const Act& src, size_t src_col, size_t n, Act& dst, size_t dst_col) {
  if (src.rows() != dst.rows() || src_col + n > src.width() || dst_col + n > dst.width())
    fail("cpu backend: copy_cols: ", n, " columns from ", src_col, " of [", src.rows(), ", ", src.width(), "] to ",
         dst_col, " of [", dst.rows(), ", ", dst.width(), "]");
  for (size_t t = 0; t < src.rows(); ++t)
    std::copy_n(data(src) + t * src.width() + src_col, n, data(dst) + t * dst.width() + dst_col);
}

void CpuBackend::round_bf16(const Act& src, Act& dst, size_t dst_col) {
  const size_t w = src.width();
  if (src.rows() != dst.rows() || dst_col + w > dst.width())
    fail("cpu backend: round_bf16: [", src.rows(), ", ", w, "] at column ", dst_col, " of [", dst.rows(), ", ",
         dst.width(), "]");
  for (size_t t = 0; t < src.rows(); ++t) {
    const float* s = data(src) + t * w;
    float* d = data(dst) + t * dst.width() + dst_col;
    for (size_t i = 0; i < w; ++i) d[i] = bf16_to_f32(f32_to_bf16(s[i]));
  }
}

void CpuBackend::embed(const WeightView& table, std::span<const uint32_t> ids, Act& out) {
  check_shape(out, ids.size(), table.cols, "embed", "out");
  if (table.type != WeightType::BF16 && table.type != WeightType::F32)
    fail("cpu backend: embed: a ", weight_type_name(table.type), " table (BF16 or F32 only)");
  const size_t d = table.cols;
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] >= table.rows) fail("cpu backend: embed: id ", ids[t], " outside the table's ", table.rows, " rows");
    float* o = data(out) + t * d;
    if (table.type == WeightType::F32) {
      std::memcpy(o, static_cast<const float*>(table.data) + ids[t] * d, d * sizeof(float));
      continue;
    }
    const uint8_t* row = static_cast<const uint8_t*>(table.data) + static_cast<size_t>(ids[t]) * d * 2;
    for (size_t i = 0; i < d; ++i) o[i] = bf16_to_f32(load_u16le(row + 2 * i));
  }
}

void CpuBackend::matmul(const WeightView& w, const Act& x, Act& y) {
  check_shape(x, x.rows(), w.cols, "matmul", "x");
  check_shape(y, x.rows(), w.rows, "matmul", "y");
  deltafin::matmul(w, data(x), x.rows(), data(y), pool_);
}

// The activation runs on each thread's rows as its products finish, inside
// the products' one parallel_for (elementwise: the split changes no bit).
void CpuBackend::gated_matmul(const WeightView& gate, const WeightView& up, const Act& x, Gate fn, Act& h) {
  const size_t n = x.rows(), I = gate.rows;
  check_shape(x, n, gate.cols, "gated_matmul", "x");
  check_shape(h, n, I, "gated_matmul", "h");
  if (up.rows != gate.rows || up.cols != gate.cols)
    fail("cpu backend: gated_matmul: up is [", up.rows, ", ", up.cols, "], gate [", gate.rows, ", ", gate.cols, "]");
  Act u = act(n, I);
  float* ud = data(u);
  if (fn.kind == Gate::Kind::SiluMul) {  // silu(g) * u in place: h is g
    float* g = data(h);
    matmul_pair(gate, up, data(x), n, g, ud, pool_, [&](size_t rb, size_t re) {
      for (size_t t = 0; t < n; ++t)
        for (size_t i = t * I + rb; i < t * I + re; ++i) g[i] = silu(g[i]) * ud[i];
    });
    return;
  }
  Act g = act(n, I);
  float *gd = data(g), *hd = data(h);
  matmul_pair(gate, up, data(x), n, gd, ud, pool_, [&](size_t rb, size_t re) {
    for (size_t t = 0; t < n; ++t) situ(gd + t * I + rb, ud + t * I + rb, re - rb, fn.beta, fn.beta_lin, hd + t * I + rb);
  });
}

void CpuBackend::rmsnorm(const Act& x, std::span<const float> w, float eps, Act& y) {
  const size_t d = x.width();
  check_shape(y, x.rows(), d, "rmsnorm", "y");
  if (!w.empty() && w.size() != d) fail("cpu backend: rmsnorm: ", w.size(), " weights for rows of ", d);
  for (size_t t = 0; t < x.rows(); ++t) deltafin::rmsnorm(data(x) + t * d, w.empty() ? nullptr : w.data(), d, eps, data(y) + t * d);
}

void CpuBackend::rmsnorm_heads(Act& x, std::span<const float> w, size_t head_dim, float eps) {
  if (head_dim == 0 || x.width() % head_dim != 0 || w.size() != head_dim)
    fail("cpu backend: rmsnorm_heads: rows of ", x.width(), ", heads of ", head_dim, ", ", w.size(), " weights");
  float* p = data(x);
  for (size_t i = 0; i < x.size(); i += head_dim) deltafin::rmsnorm(p + i, w.data(), head_dim, eps, p + i);
}

void CpuBackend::rope_half(Act& x, size_t head_dim, const Act& cos, const Act& sin) {
  const size_t half = head_dim / 2;
  if (head_dim == 0 || head_dim % 2 != 0 || x.width() % head_dim != 0)
    fail("cpu backend: rope_half: rows of ", x.width(), ", heads of ", head_dim);
  check_shape(cos, x.rows(), half, "rope_half", "cos");
  check_shape(sin, x.rows(), half, "rope_half", "sin");
  for (size_t t = 0; t < x.rows(); ++t)
    for (size_t h = 0; h < x.width(); h += head_dim)
      rope_head(data(x) + t * x.width() + h, data(cos) + t * half, data(sin) + t * half, half);
}

void CpuBackend::rope_pairs(Act& x, size_t head_dim, const Act& cos, const Act& sin) {
  const size_t half = head_dim / 2;
  if (head_dim == 0 || head_dim % 2 != 0 || x.width() % head_dim != 0)
    fail("cpu backend: rope_pairs: rows of ", x.width(), ", heads of ", head_dim);
  check_shape(cos, x.rows(), half, "rope_pairs", "cos");
  check_shape(sin, x.rows(), half, "rope_pairs", "sin");
  // One head's de-interleaved copy; a head is a few dozen floats (64 for
  // DeepSeek V3), so it lives on the stack up to that and on the heap past.
  constexpr size_t kStackHead = 256;
  float stack[kStackHead];
  std::vector<float> heap(head_dim > kStackHead ? head_dim : 0);
  float* tmp = head_dim > kStackHead ? heap.data() : stack;
  for (size_t t = 0; t < x.rows(); ++t)
    for (size_t h = 0; h < x.width(); h += head_dim) {
      float* head = data(x) + t * x.width() + h;
      for (size_t i = 0; i < half; ++i) tmp[i] = head[2 * i], tmp[half + i] = head[2 * i + 1];
      rope_head(tmp, data(cos) + t * half, data(sin) + t * half, half);
      std::copy_n(tmp, head_dim, head);
    }
}

void CpuBackend::add(Act& x, const Act& d) {
  check_shape(d, x.rows(), x.width(), "add", "d");
  float* xp = data(x);
  const float* dp = data(d);
  for (size_t i = 0; i < x.size(); ++i) xp[i] = xp[i] + dp[i];
}

void CpuBackend::mul_sigmoid(Act& x, const Act& g) {
  check_shape(g, x.rows(), x.width(), "mul_sigmoid", "g");
  float* xp = data(x);
  const float* gp = data(g);
  for (size_t i = 0; i < x.size(); ++i) xp[i] = xp[i] * sigmoid(gp[i]);
}

// Rows are independent: spread over the threads, each row computed whole by
// one thread in the definition's order.
void CpuBackend::depth_mix(std::span<const Act* const> values, std::span<const float> s, float eps, Act& out) {
  const size_t T = out.rows(), d = out.width(), n = values.size();
  if (n == 0) fail("cpu backend: depth_mix: no values");
  for (const Act* v : values) check_shape(*v, T, d, "depth_mix", "a value");
  if (s.size() != d) fail("cpu backend: depth_mix: ", s.size(), " weights for rows of ", d);
  auto rows = [&](size_t begin, size_t end) {
    thread_local std::vector<float> key, alpha;
    key.resize(d);
    alpha.resize(n);
    for (size_t t = begin; t < end; ++t) {
      for (size_t j = 0; j < n; ++j) {
        deltafin::rmsnorm(data(*values[j]) + t * d, nullptr, d, eps, key.data());
        alpha[j] = dot(key.data(), s.data(), d);
      }
      softmax(alpha.data(), n);
      float* o = data(out) + t * d;
      for (size_t i = 0; i < d; ++i) o[i] = 0.0f;
      for (size_t j = 0; j < n; ++j) {
        const float* v = data(*values[j]) + t * d;
        for (size_t i = 0; i < d; ++i) o[i] = o[i] + alpha[j] * v[i];
      }
    }
  };
  if (pool_ && T > 1)
    pool_->parallel_for(T, rows);
  else
    rows(0, T);
}

void CpuBackend::weighted_sum(const Act& y, std::span<const float> w, size_t k, Act& out) {
  const size_t n = out.rows(), d = out.width();
  check_shape(y, n * k, d, "weighted_sum", "y");
  if (w.size() != n * k) fail("cpu backend: weighted_sum: ", w.size(), " weights for ", n * k, " rows");
  for (size_t t = 0; t < n; ++t) {
    float* o = data(out) + t * d;
    std::fill(o, o + d, 0.0f);
    for (size_t i = 0; i < k; ++i) {
      const float* yi = data(y) + (t * k + i) * d;
      const float wi = w[t * k + i];
      for (size_t c = 0; c < d; ++c) {
        const float prod = yi[c] * wi;  // rounded, then added: no fma
        o[c] = o[c] + prod;
      }
    }
  }
}

void CpuBackend::gather(const Act& src, std::span<const uint32_t> rows, Act& dst) {
  const size_t d = src.width();
  check_shape(dst, rows.size(), d, "gather", "dst");
  for (size_t j = 0; j < rows.size(); ++j) {
    if (rows[j] >= src.rows()) fail("cpu backend: gather: row ", rows[j], " of ", src.rows());
    std::copy_n(data(src) + rows[j] * d, d, data(dst) + j * d);
  }
}

void CpuBackend::scatter(const Act& src, std::span<const uint32_t> rows, Act& dst) {
  const size_t d = src.width();
  check_shape(src, rows.size(), dst.width(), "scatter", "src");
  for (size_t j = 0; j < rows.size(); ++j) {
    if (rows[j] >= dst.rows()) fail("cpu backend: scatter: row ", rows[j], " of ", dst.rows());
    std::copy_n(data(src) + j * d, d, data(dst) + rows[j] * d);
  }
}

void CpuBackend::kv_store(const Act& k, const Act& v, KvLayer cache, int64_t start) {
  const size_t w = k.width();
  check_shape(v, k.rows(), w, "kv_store", "v");
  if (w > cache.stride) fail("cpu backend: kv_store: rows of ", w, " in a cache of stride ", cache.stride);
  if (start < 0) fail("cpu backend: kv_store: start position ", start, " is negative");
  for (size_t t = 0; t < k.rows(); ++t) {
    const size_t at = (static_cast<size_t>(start) + t) * cache.stride;
    std::copy_n(data(k) + t * w, w, cache.keys + at);
    std::copy_n(data(v) + t * w, w, cache.values + at);
  }
}

bool CpuBackend::attention_gqa(const Act& q, KvLayer cache, const GqaShape& s, Act& out,
                               const std::function<bool()>& stop) {
  const size_t T = q.rows(), H = s.heads, hd = s.head_dim;
  if (H == 0 || s.kv_heads == 0 || H % s.kv_heads != 0) fail("cpu backend: attention: ", H, " heads over ", s.kv_heads);
  if (s.start < 0) fail("cpu backend: attention: start position ", s.start, " is negative");
  const size_t G = H / s.kv_heads, qd = H * hd, start = static_cast<size_t>(s.start);
  check_shape(q, T, qd, "attention", "q");
  check_shape(out, T, qd, "attention", "out");
  const float* qd_ = data(q);
  float* od = data(out);
  for (size_t t0 = 0; t0 < T; t0 += kAttentionStopRows) {
    const size_t t1 = std::min(T, t0 + kAttentionStopRows);
    auto block = [&](size_t begin, size_t end) {
      // Per thread, grown geometrically with the context: decoding allocates
      // only when the context doubles.
      thread_local std::vector<float> scratch;
      if (scratch.size() < start + t1) scratch.resize(std::max(start + t1, 2 * scratch.size()));
      for (size_t item = begin; item < end; ++item) {
        const size_t t = t0 + item / H, hh = item % H, g = hh / G;
        attention(qd_ + t * qd + hh * hd, cache.keys + g * hd, cache.stride, cache.values + g * hd, cache.stride,
                  start + t + 1, hd, hd, s.scale, scratch.data(), od + t * qd + hh * hd);
      }
    };
    if (pool_)
      pool_->parallel_for((t1 - t0) * H, block);
    else
      block(0, (t1 - t0) * H);
    if (stop && t1 < T && stop()) return false;
  }
  return true;
}

void CpuBackend::latent_store(const Act& ckv, std::span<const float> w, float eps, LatentLayer cache, int64_t start) {
  const size_t R = cache.width();
  check_shape(ckv, ckv.rows(), R, "latent_store", "ckv");
  if (w.size() != cache.rank) fail("cpu backend: latent_store: ", w.size(), " norm weights for a latent of ", cache.rank);
  if (start < 0) fail("cpu backend: latent_store: start position ", start);
  for (size_t t = 0; t < ckv.rows(); ++t) {
    const float* in = data(ckv) + t * R;
    float* row = cache.rows + (static_cast<size_t>(start) + t) * R;
    deltafin::rmsnorm(in, w.data(), cache.rank, eps, row);
    std::copy(in + cache.rank, in + R, row + cache.rank);
  }
}

// All heads share the cache rows, so the rows are swept twice per query row
// (once for every head's scores, once for every head's weighted sum) rather
// than twice per head: a long cache is read from memory 2 times per row
// instead of 2H. Each score and each sum is the same canonical dot /
// ascending axpy a per-head loop would do (ops.h attention()), so the bits
// do not depend on the loop order.
bool CpuBackend::attention_latent(const Act& q, LatentLayer cache, const MlaShape& shape, Act& u,
                                  const std::function<bool()>& stop) {
  const size_t T = q.rows(), H = shape.heads, R = cache.width(), rank = cache.rank;
  if (H == 0 || rank == 0) fail("cpu backend: attention_latent: ", H, " heads of rank ", rank);
  if (shape.start < 0) fail("cpu backend: attention_latent: start position ", shape.start);
  check_shape(q, T, H * R, "attention_latent", "q");
  check_shape(u, T, H * rank, "attention_latent", "u");
  const size_t base = static_cast<size_t>(shape.start);
  thread_local std::vector<float> scores;  // grown to the longest context seen: decoding allocates nothing
  if (scores.size() < H * (base + T)) scores.resize(H * (base + T));
  for (size_t t = 0; t < T; ++t) {
    const size_t n = base + t + 1;
    const float* q_t = data(q) + t * H * R;
    for (size_t j = 0; j < n; ++j) {
      if (j % kLatentStopRows == 0 && stop && stop()) return false;  // a long context is seconds of work per row
      const float* row = cache.rows + j * R;
      for (size_t h = 0; h < H; ++h) scores[h * n + j] = dot(q_t + h * R, row, R) * shape.scale;
    }
    for (size_t h = 0; h < H; ++h) softmax(scores.data() + h * n, n);
    float* u_t = data(u) + t * H * rank;
    for (size_t i = 0; i < H * rank; ++i) u_t[i] = 0.0f;
    for (size_t j = 0; j < n; ++j) {
      if (j % kLatentStopRows == 0 && stop && stop()) return false;
      const float* row = cache.rows + j * R;
      for (size_t h = 0; h < H; ++h) axpy(scores[h * n + j], row, u_t + h * rank, rank);
    }
  }
  return true;
}

// Position by position (each row's convolution and step read the state the
// row before left), which is what makes a T-row call equal T one-row calls.
void CpuBackend::kda_recurrence(const Act& q, const Act& k, const Act& v, const Act& gate, const Act& r, const Act& b,
                                const KdaParams& p, KdaLayerState state, const KdaTrace* trace, Act& o) {
  const size_t T = q.rows(), H = p.heads, K = p.head_dim, D = H * K, kernel = p.kernel;
  if (H == 0 || K == 0 || kernel == 0) fail("cpu backend: kda_recurrence: ", H, " heads of ", K, ", kernel ", kernel);
  for (const Act* a : {&q, &k, &v, &gate, &r}) check_shape(*a, T, D, "kda_recurrence", "an input");
  check_shape(b, T, H, "kda_recurrence", "b");
  check_shape(o, T, D, "kda_recurrence", "o");
  if (p.q_conv.size() != D * kernel || p.k_conv.size() != D * kernel || p.v_conv.size() != D * kernel ||
      p.a_log.size() != K || p.dt_bias.size() != D || p.o_norm.size() != K)
    fail("cpu backend: kda_recurrence: weights do not fit ", H, " heads of ", K, " with kernel ", kernel);
  thread_local std::vector<float> qc, kc, vc, g;
  qc.resize(D), kc.resize(D), vc.resize(D), g.resize(D);
  if (trace) {
    std::copy_n(data(q), T * D, trace->raw_q);
    std::copy_n(data(k), T * D, trace->raw_k);
    std::copy_n(data(v), T * D, trace->raw_v);
  }
  for (size_t t = 0; t < T; ++t) {
    short_conv_step(data(q) + t * D, p.q_conv.data(), state.conv_q, D, kernel, qc.data());
    short_conv_step(data(k) + t * D, p.k_conv.data(), state.conv_k, D, kernel, kc.data());
    short_conv_step(data(v) + t * D, p.v_conv.data(), state.conv_v, D, kernel, vc.data());
    for (size_t h = 0; h < H; ++h) {
      l2_normalize(qc.data() + h * K, K, 1e-12f);
      l2_normalize(kc.data() + h * K, K, 1e-12f);
    }
    for (size_t i = 0; i < D; ++i) qc[i] = qc[i] * p.q_scale;
    // Safe decay gate: A_log is per key channel, shared by the heads.
    const float* r_t = data(r) + t * D;
    for (size_t h = 0; h < H; ++h)
      for (size_t c = 0; c < K; ++c) {
        const size_t i = h * K + c;
        const float rr = r_t[i] + p.dt_bias[i];
        g[i] = p.lower * sigmoid(portable_expf(p.a_log[c]) * rr);
      }
    if (trace) {
      std::copy(qc.begin(), qc.end(), trace->q + t * D);
      std::copy(kc.begin(), kc.end(), trace->k + t * D);
      std::copy(vc.begin(), vc.end(), trace->v + t * D);
      std::copy(g.begin(), g.end(), trace->g + t * D);
    }
    const float* gate_t = data(gate) + t * D;
    float* o_t = data(o) + t * D;
    for (size_t h = 0; h < H; ++h) {
      const float beta = sigmoid(data(b)[t * H + h]);
      if (trace) trace->beta[t * H + h] = beta;
      float* oh = o_t + h * K;
      kda_step(state.recurrent + h * K * K, qc.data() + h * K, kc.data() + h * K, vc.data() + h * K, g.data() + h * K,
               beta, K, K, oh);
      deltafin::rmsnorm(oh, p.o_norm.data(), K, p.eps, oh);
      for (size_t c = 0; c < K; ++c) oh[c] = oh[c] * sigmoid(gate_t[h * K + c]);
    }
  }
}

void CpuBackend::kda_replay(const KdaParams& p, KdaLayerState state, const KdaSteps& steps, size_t rows) {
  const size_t H = p.heads, K = p.head_dim, D = H * K, kernel = p.kernel;
  if (H == 0 || K == 0 || kernel == 0) fail("cpu backend: kda_replay: ", H, " heads of ", K, ", kernel ", kernel);
  if (p.q_conv.size() != D * kernel || p.k_conv.size() != D * kernel || p.v_conv.size() != D * kernel)
    fail("cpu backend: kda_replay: convolution weights do not fit ", H, " heads of ", K, " with kernel ", kernel);
  thread_local std::vector<float> scratch;
  scratch.resize(D);
  for (size_t t = 0; t < rows; ++t) {
    // The convolution's outputs are already in the trace; only its window moves.
    short_conv_step(steps.raw_q + t * D, p.q_conv.data(), state.conv_q, D, kernel, scratch.data());
    short_conv_step(steps.raw_k + t * D, p.k_conv.data(), state.conv_k, D, kernel, scratch.data());
    short_conv_step(steps.raw_v + t * D, p.v_conv.data(), state.conv_v, D, kernel, scratch.data());
    for (size_t h = 0; h < H; ++h) {
      const size_t at = t * D + h * K;
      kda_step(state.recurrent + h * K * K, steps.q + at, steps.k + at, steps.v + at, steps.g + at, steps.beta[t * H + h],
               K, K, scratch.data());
    }
  }
}

void CpuBackend::run_experts(std::span<const size_t> rows_per_expert, const std::function<void(size_t j)>& compute) {
  compute_expert_group(pool_, rows_per_expert, compute);
}

}  // namespace deltafin
