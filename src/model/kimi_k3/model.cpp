#include "model/kimi_k3/model.h"

#include <algorithm>

#include "model/kimi_k3/tensors.h"
#include "model/kimi_k3/lookahead.h"
#include "model/kimi_k3/session_file.h"
#include "backend/cpu_backend.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

K3Model::K3Model(const K3Config& config, const K3Weights& weights, ExpertSource& experts, Backend& backend,
                 ThreadPool* pool)
    : c_(config), w_(weights), summary_(k3_summary(config)), experts_(experts), pool_(pool), be_(backend),
      routed_(backend, experts, k3_expert(config), static_cast<size_t>(config.num_experts)) {}

K3Model::K3Model(const K3Config& config, const K3Weights& weights, ExpertSource& experts, ThreadPool* pool)
    : K3Model(config, weights, experts, *new CpuBackend(pool), pool) {
  own_backend_.reset(&be_);
}

K3Model::~K3Model() = default;

// Mix (§7.2): softmax over depth of dot(rms_normalize(v_j), s), then the
// α-weighted sum of the raw v_j in ascending j.
void K3Model::mix(const std::vector<const float*>& values, const std::vector<float>& s, float* out) const {
  const size_t d = static_cast<size_t>(c_.hidden_size);
  const float eps = static_cast<float>(c_.rms_norm_eps);
  std::vector<float> key(d), alpha(values.size());
  for (size_t j = 0; j < values.size(); ++j) {
    rmsnorm(values[j], nullptr, d, eps, key.data());
    alpha[j] = dot(key.data(), s.data(), d);
  }
  softmax(alpha.data(), alpha.size());
  for (size_t i = 0; i < d; ++i) out[i] = 0.0f;
  for (size_t j = 0; j < values.size(); ++j)
    for (size_t i = 0; i < d; ++i) out[i] = out[i] + alpha[j] * values[j][i];
}

bool K3Model::cancel_requested() {
  if (!shape_ || !shape_->cancelled) return false;
  if (cancel_seen_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now - cancel_polled_ < shape_->poll_interval) return false;
  cancel_polled_ = now;
  cancel_seen_ = shape_->cancelled();
  return cancel_seen_;
}

void K3Model::stop_if_cancelled() {
  if (cancel_requested()) throw PassCancelled{};
}

// Each thread applies SiTU to the gate and up rows it has just computed, in
// the products' parallel_for (matmul_pair with `then`): one hand-off less per
// MLP, which at decode is one per routed expert. SiTU is elementwise, so the
// split changes no bit.
void K3Model::gated_situ(const WeightView& gate, const WeightView& up, const float* x, size_t n, Rows& g, Rows& u,
                         Rows& hid) {
  const float beta = static_cast<float>(c_.situ_beta), beta_lin = static_cast<float>(c_.situ_linear_beta);
  matmul_pair(gate, up, x, n, g.v.data(), u.v.data(), pool_, [&](size_t rb, size_t re) {
    for (size_t t = 0; t < n; ++t) situ(g.row(t) + rb, u.row(t) + rb, re - rb, beta, beta_lin, hid.row(t) + rb);
  });
}

void K3Model::dense_mlp(const LayerWeights& w, const Rows& x, Rows& out, size_t slice_rows) {
  const size_t I = w.dense.gate.rows, S = slice_rows == 0 || slice_rows > x.T ? x.T : slice_rows;
  for (size_t r0 = 0; r0 < x.T; r0 += S) {
    const size_t n = std::min(S, x.T - r0);
    Rows g(n, I), u(n, I), hid(n, I);
    gated_situ(w.dense.gate.view(), w.dense.up.view(), x.row(r0), n, g, u, hid);
    matmul(w.dense.down.view(), hid.v.data(), n, out.row(r0), pool_);
    stop_if_cancelled();
  }
}

void K3Model::set_capture_layers(std::vector<int64_t> layers) {
  for (int64_t l : layers)
    if (l < 0 || l >= c_.num_hidden_layers) fail("capture: layer ", l, " is outside the model's ", c_.num_hidden_layers, " layers");
  capture_layers_ = std::move(layers);
  captured_ = Rows();
}

// One layer's attention over the pass's rows, slice after slice in position
// order (a slice attends to the slices before it through the layer's cache or
// recurrent state, exactly as one T-row call would).
void K3Model::attention_sliced(int64_t layer, K3Session& s, const Rows& x, Rows& out, size_t slice_rows) {
  const bool kda = c_.layer_kinds[static_cast<size_t>(layer)] == LayerKind::KDA;
  if (slice_rows == 0 || slice_rows >= x.T) {
    if (kda) attention_kda(layer, s, x, out);
    else attention_mla(layer, s, x, out, 0);
    return;
  }
  if (kda && kda_log_) fail("forward: a KDA step log covers one unsliced pass");
  for (size_t r0 = 0; r0 < x.T; r0 += slice_rows) {
    const size_t n = std::min(slice_rows, x.T - r0);
    Rows xs(n, x.n), os(n, out.n);
    std::copy(x.row(r0), x.row(r0) + n * x.n, xs.v.begin());
    if (kda) attention_kda(layer, s, xs, os);
    else attention_mla(layer, s, xs, os, r0);
    std::copy(os.v.begin(), os.v.end(), out.row(r0));
    stop_if_cancelled();
  }
}

K3Session& k3_session(ModelSession& session) { return session_as<K3Session>(session, "K3"); }
const K3Session& k3_session(const ModelSession& session) { return session_as<K3Session>(session, "K3"); }

ModelSummary k3_summary(const K3Config& c) {
  ModelSummary m;
  m.family = "kimi_k3";
  m.layers = c.num_hidden_layers;
  m.vocab = c.vocab_size;
  m.context = c.max_position_embeddings;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.is_moe_layer(l)) m.moe_layers.push_back(l);
  m.experts = c.num_experts;
  m.top_k = c.num_experts_per_token;
  m.expert_record_bytes = k3_expert_record_bytes(c);
  m.session_fixed_bytes = K3Session::fixed_bytes(c);
  m.session_bytes_per_position = K3Session::bytes_per_position(c);
  // A layer-major pass keeps, per position: h, the block-partial p, both Mix
  // outputs, the normed input, attention's and the MLP's outputs (7 rows of
  // width d), one anchor per AttnRes block, the router's and latent
  // projection's rows, and its route in every MoE layer.
  const uint64_t d = static_cast<uint64_t>(c.hidden_size);
  const uint64_t blocks = static_cast<uint64_t>((c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size);
  m.pass_row_bytes = 4 * (d * (7 + blocks) + static_cast<uint64_t>(c.num_experts + c.routed_expert_hidden_size)) +
                     m.moe_layers.size() * route_bytes(c.num_experts_per_token);
  return m;
}

std::unique_ptr<ModelSession> K3Model::new_session() const { return std::make_unique<K3Session>(c_); }

Rows K3Model::forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits, const PassShape& shape) {
  return forward_k3(k3_session(session), tokens, all_logits, shape);
}

namespace {
struct K3Mark : SessionMark {
  K3Session::Snapshot snapshot;
  uint64_t bytes() const override {
    uint64_t n = 0;
    for (const KdaState& k : snapshot.kda)
      n += (k.conv_q.size() + k.conv_k.size() + k.conv_v.size() + k.recurrent.size()) * sizeof(float);
    return n;
  }
};

const K3Mark& k3_mark(const SessionMark& mark) {
  auto* m = dynamic_cast<const K3Mark*>(&mark);
  if (!m) fail("K3 model: the mark belongs to another model family");
  return *m;
}
}  // namespace

std::shared_ptr<SessionMark> K3Model::mark(const ModelSession& session) const {
  auto m = std::make_shared<K3Mark>();
  m->snapshot = k3_session(session).snapshot();
  m->length = m->snapshot.length;
  return m;
}

void K3Model::rewind(ModelSession& session, const SessionMark& mark) const {
  k3_session(session).restore(k3_mark(mark).snapshot);
}

std::unique_ptr<ModelSession> K3Model::copy_at(const ModelSession& session, const SessionMark& at) const {
  const K3Mark& m = k3_mark(at);
  auto copy = std::make_unique<K3Session>(k3_session(session));
  copy->restore(m.snapshot);
  return copy;
}

uint64_t K3Model::state_values(int64_t length) const { return session_state_bytes(c_, length) / sizeof(float); }

void K3Model::for_each_state_part(const ModelSession& session, const SessionMark& at, const StatePartFn& part) const {
  const K3Mark& m = k3_mark(at);
  deltafin::for_each_state_part(c_, m.snapshot, k3_session(session), m.length, part);
}

void K3Model::read_state(ModelSession& fresh, int64_t length, const StateReadFn& read) const {
  read_state_parts(c_, length, k3_session(fresh), read);
}

Rows K3Model::forward_verify(ModelSession& session, std::span<const uint32_t> tokens) {
  K3Session& s = k3_session(session);
  // The KDA state is fixed-size: copying it costs one pass over it, far less
  // than the pass; the MLA caches are only cut, never copied.
  verify_before_ = s.snapshot();
  verify_rows_ = 0;
  verify_session_ = nullptr;
  set_kda_log(&verify_log_);
  Rows logits;
  try {
    logits = forward_k3(s, tokens, true, {});
  } catch (...) {
    set_kda_log(nullptr);
    s.restore(verify_before_);  // a failed pass (e.g. an expert read error) leaves the session as it was
    throw;
  }
  set_kda_log(nullptr);
  verify_rows_ = tokens.size();
  verify_session_ = &session;
  return logits;
}

void K3Model::keep_verified(ModelSession& session, size_t rows) {
  if (rows == 0 || rows > verify_rows_) fail("verifier: cannot commit ", rows, " rows of a ", verify_rows_, "-row pass");
  if (&session != verify_session_) fail("verifier: keep_verified on another session than the verified pass's");
  if (rows < verify_rows_) {  // else every row kept: the pass left the session exactly right
    K3Session& s = k3_session(session);
    s.rollback(verify_before_, verify_before_.length + static_cast<int64_t>(rows));
    replay_kda(s, verify_log_, rows);
  }
  verify_rows_ = 0;
  verify_session_ = nullptr;
  verify_before_ = K3Session::Snapshot{};
  verify_log_ = KdaLog{};
}

Rows K3Model::forward_k3(K3Session& session, std::span<const uint32_t> tokens, bool all_logits, const PassShape& shape) {
  const size_t T = tokens.size(), d = static_cast<size_t>(c_.hidden_size);
  if (T == 0) fail("forward: no tokens");
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const int64_t B = c_.attn_res_block_size;

  // h: the current block-partial sum per position; anchors: completed block sums.
  Rows h(T, d);
  for (size_t t = 0; t < T; ++t) {
    if (tokens[t] >= static_cast<uint32_t>(c_.vocab_size)) fail("forward: token id ", tokens[t], " outside the vocabulary of ", c_.vocab_size);
    const uint8_t* row = w_.embed.storage.data() + static_cast<size_t>(tokens[t]) * d * 2;
    for (size_t i = 0; i < d; ++i) h.row(t)[i] = bf16_to_f32(load_u16le(row + 2 * i));
  }
  std::vector<Rows> anchors;
  routes_.resize(static_cast<size_t>(c_.num_hidden_layers));  // layer 0's stays empty
  if (kda_log_) {
    kda_log_->rows = T;
    kda_log_->layers.resize(static_cast<size_t>(c_.num_hidden_layers));
  }
  // Ends however the pass does (a cancellation, an expert read error), or
  // below, once the layers are done.
  ExpertPass pass(experts_, T);
  // Layer 1 has no PILOT prediction (layer 0 has no router): the previous
  // token's layer-1 route is the hint, read while layer 0 runs.
  if (lookahead_) {
    std::vector<int64_t> first = lookahead_->plan_first_layer();
    if (!first.empty()) experts_.prefetch(1, first);
  }

  Rows x_attn(T, d), normed(T, d), a(T, d), p(T, d), x_mlp(T, d), f(T, d);
  const size_t n_capture = capture_layers_.size();
  captured_ = n_capture ? Rows(T, n_capture * d) : Rows();
  auto mix_rows = [&](const Rows& last, const std::vector<float>& s, Rows& out) {
    for (size_t t = 0; t < T; ++t) {
      std::vector<const float*> vs;
      for (const Rows& an : anchors) vs.push_back(an.row(t));
      vs.push_back(last.row(t));
      mix(vs, s, out.row(t));
    }
  };

  // Cancellation inside a layer unwinds to here (PassCancelled, thrown only
  // between whole units of work); the session is then part-way and the
  // caller restores the snapshot it took.
  struct PassGuard {
    K3Model& m;
    ~PassGuard() { m.shape_ = nullptr; }
  } guard{*this};
  shape_ = &shape;
  cancel_seen_ = false;
  cancel_polled_ = std::chrono::steady_clock::now();
  try {
  for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
    if (shape.on_layer) shape.on_layer(i);
    if (shape.cancelled && shape.cancelled()) return Rows();
    cancel_polled_ = std::chrono::steady_clock::now();
    const LayerWeights& lw = w_.layers[static_cast<size_t>(i)];
    if (anchors.empty())
      x_attn = h;
    else
      mix_rows(h, lw.s_attn, x_attn);
    const bool block_start = i % B == 0;
    if (block_start) anchors.push_back(h);

    for (size_t t = 0; t < T; ++t) rmsnorm(x_attn.row(t), lw.input_norm.data(), d, eps, normed.row(t));
    attention_sliced(i, session, normed, a, shape.slice_rows);

    if (block_start) {
      p = a;
    } else {
      for (size_t j = 0; j < p.v.size(); ++j) p.v[j] = h.v[j] + a.v[j];
    }
    mix_rows(p, lw.s_mlp, x_mlp);
    // Predict layer i+1's experts from this x_mlp and start their reads now,
    // so they overlap this layer's reads and compute (§11).
    if (lookahead_ && i + 1 < c_.num_hidden_layers && c_.is_moe_layer(i + 1) && i >= 1) {
      std::vector<int64_t> next = lookahead_->plan(i + 1, x_mlp);
      if (!next.empty()) experts_.prefetch(i + 1, next);
    }
    for (size_t t = 0; t < T; ++t) rmsnorm(x_mlp.row(t), lw.post_attention_norm.data(), d, eps, normed.row(t));
    if (c_.is_moe_layer(i))
      moe(i, normed, f, shape.slice_rows);
    else
      dense_mlp(lw, normed, f, shape.slice_rows);
    for (size_t j = 0; j < h.v.size(); ++j) h.v[j] = p.v[j] + f.v[j];
    for (size_t k = 0; k < n_capture; ++k) {
      if (capture_layers_[k] != i) continue;
      for (size_t t = 0; t < T; ++t)
        for (size_t j = 0; j < d; ++j) captured_.row(t)[k * d + j] = bf16_to_f32(f32_to_bf16(h.row(t)[j]));
    }
  }
  } catch (const PassCancelled&) {
    return Rows();
  }
  session.advance(static_cast<int64_t>(T));
  pass.end();

  // Tail: Mix over the anchors and h, final norm, lm_head.
  const size_t first = all_logits ? 0 : T - 1, rows = T - first;
  Rows m(rows, d);
  for (size_t t = first; t < T; ++t) {
    std::vector<const float*> vs;
    for (const Rows& an : anchors) vs.push_back(an.row(t));
    vs.push_back(h.row(t));
    std::vector<float> mixed(d);
    mix(vs, w_.s_out, mixed.data());
    rmsnorm(mixed.data(), w_.final_norm.data(), d, eps, m.row(t - first));
  }
  Rows logits(rows, static_cast<size_t>(c_.vocab_size));
  matmul(w_.lm_head.view(), m.v.data(), rows, logits.v.data(), pool_);
  return logits;
}

}  // namespace deltafin
