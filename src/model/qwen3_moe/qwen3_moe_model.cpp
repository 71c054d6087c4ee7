#include "model/qwen3_moe/qwen3_moe_model.h"

#include <chrono>

#include <algorithm>
#include <map>
#include <typeinfo>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/common/expert_group.h"
#include "model/common/greedy.h"
#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

Qwen3MoeModel::Qwen3MoeModel(const Qwen3MoeConfig& config, const Qwen3MoeWeights& weights, ExpertSource& experts,
                             ThreadPool* pool)
    : c_(config), w_(weights), summary_(qwen3_moe_summary(config)), experts_(experts), pool_(pool),
      rope_(make_qwen3_rope(config.base)) {
  if (static_cast<int64_t>(weights.layers.size()) != config.base.num_hidden_layers ||
      weights.embed.rows != static_cast<size_t>(config.base.vocab_size) ||
      weights.embed.cols != static_cast<size_t>(config.base.hidden_size))
    fail("Qwen3-MoE model: the weights were not loaded for this config");
}

// softmax in fp32 (transformers computes the router's softmax in float32
// whatever the activations' dtype), then top-k of the probabilities.
Route Qwen3MoeModel::route(const float* z) const {
  const size_t E = static_cast<size_t>(c_.num_experts), k = static_cast<size_t>(c_.num_experts_per_tok);
  std::vector<float> p(z, z + E);
  softmax(p.data(), E);
  Route r;
  r.experts = top_k_experts(p.data(), E, k);
  for (int64_t e : r.experts) r.weights.push_back(p[static_cast<size_t>(e)]);
  if (c_.norm_topk_prob) {
    float den = 0.0f;
    for (float w : r.weights) den = den + w;
    for (float& w : r.weights) w = w / den;
  }
  return r;
}

// g = silu(gate x) * up x for the n rows of x (u: scratch), each thread on
// the rows it has just computed, inside the products' one hand-off
// (elementwise: the split changes no bit).
void Qwen3MoeModel::swiglu_pair(const WeightView& gate, const WeightView& up, const float* x, size_t n, Rows& g,
                                Rows& u) {
  matmul_pair(gate, up, x, n, g.v.data(), u.v.data(), pool_, [&](size_t rb, size_t re) {
    for (size_t t = 0; t < n; ++t) {
      float* gt = g.row(t);
      const float* ut = u.row(t);
      for (size_t i = rb; i < re; ++i) gt[i] = silu(gt[i]) * ut[i];
    }
  });
}

void Qwen3MoeModel::dense_mlp(const Qwen3MoeLayerWeights& w, const Rows& h, Rows& out) {
  const size_t T = h.T, I = w.gate.rows;
  Rows g(T, I), u(T, I);
  swiglu_pair(w.gate.view(), w.up.view(), h.v.data(), T, g, u);
  matmul(w.down.view(), g.v.data(), T, out.v.data(), pool_);
}

void Qwen3MoeModel::moe(int64_t layer, const Rows& h, Rows& out) {
  const Qwen3MoeLayerWeights& w = w_.layers[static_cast<size_t>(layer)];
  const size_t T = h.T, d = h.n, E = static_cast<size_t>(c_.num_experts), k = static_cast<size_t>(c_.num_experts_per_tok);
  const size_t I = static_cast<size_t>(c_.moe_intermediate_size);
  Rows z(T, E);
  matmul(w.router.view(), h.v.data(), T, z.v.data(), pool_);
  std::vector<Route>& routes = routes_[static_cast<size_t>(layer)];
  routes.clear();
  for (size_t t = 0; t < T; ++t) routes.push_back(route(z.row(t)));

  // Each expert is fetched once and applied to every row routed to it as one
  // batched product; results go to their (row, slot) place, and the combine
  // below runs in the decided order, so arrival order changes no bit.
  std::map<int64_t, std::vector<std::pair<size_t, size_t>>> users;  // expert -> (row, slot)
  for (size_t t = 0; t < T; ++t)
    for (size_t i = 0; i < k; ++i) users[routes[t].experts[i]].push_back({t, i});
  std::vector<int64_t> needed;
  std::vector<const std::vector<std::pair<size_t, size_t>>*> needed_rows;
  for (const auto& [e, rows] : users) needed.push_back(e), needed_rows.push_back(&rows);
  std::vector<float> expert_out(T * k * d);  // [row][slot][d]
  const uint64_t part = c_.expert_tensor_bytes();
  // One expert's MLP on its rows, on whichever thread compute_expert_group
  // gives it: it touches nothing but its own buffers and expert_out places.
  auto compute = [&](const ReadyExpert& ready) {
    const auto& rows = *needed_rows[ready.index];
    const uint8_t* p = ready.record;
    const WeightView gate{WeightType::BF16, I, d, p, nullptr};
    const WeightView up{WeightType::BF16, I, d, p + part, nullptr};
    const WeightView down{WeightType::BF16, d, I, p + 2 * part, nullptr};
    const size_t m = rows.size();
    Rows in(m, d), g(m, I), u(m, I), y(m, d);
    for (size_t j = 0; j < m; ++j) std::copy(h.row(rows[j].first), h.row(rows[j].first) + d, in.row(j));
    swiglu_pair(gate, up, in.v.data(), m, g, u);
    matmul(down, g.v.data(), m, y.v.data(), pool_);
    for (size_t j = 0; j < m; ++j)
      std::copy(y.row(j), y.row(j) + d, expert_out.data() + (rows[j].first * k + rows[j].second) * d);
  };
  experts_.for_each_ready_group(layer, needed, [&](std::span<const ReadyExpert> group) {
    std::vector<size_t> rows_per_expert;
    for (const ReadyExpert& r : group) rows_per_expert.push_back(needed_rows[r.index]->size());
    compute_expert_group(pool_, rows_per_expert, [&](size_t j) { compute(group[j]); });
  });
  for (size_t t = 0; t < T; ++t) {
    float* o = out.row(t);
    std::fill(o, o + d, 0.0f);
    for (size_t i = 0; i < k; ++i) {
      const float* yi = expert_out.data() + (t * k + i) * d;
      const float wi = routes[t].weights[i];
      for (size_t c = 0; c < d; ++c) {
        const float prod = yi[c] * wi;
        o[c] = o[c] + prod;
      }
    }
  }
}

Qwen3Session& qwen3_session(ModelSession& session) { return session_as<Qwen3Session>(session, "Qwen3"); }
const Qwen3Session& qwen3_session(const ModelSession& session) { return session_as<Qwen3Session>(session, "Qwen3"); }

ModelSummary qwen3_moe_summary(const Qwen3MoeConfig& c) {
  const Qwen3Config& b = c.base;
  ModelSummary m;
  m.family = "qwen3_moe";
  m.layers = b.num_hidden_layers;
  m.vocab = b.vocab_size;
  m.context = b.max_position_embeddings;
  m.moe_layers = c.moe_layers();
  m.experts = c.num_experts;
  m.top_k = c.num_experts_per_tok;
  m.expert_record_bytes = c.expert_record_bytes();
  m.session_fixed_bytes = 0;
  m.session_bytes_per_position = Qwen3Session::bytes_per_position(b);
  // Per position of a pass: x, h and the MLP output (3 rows of width d), the
  // attention block's input norm, q, k, v, its output and o_proj's (d, 2 q_dim,
  // 2 kv_dim, d), the router's logits, the k expert outputs (k rows of d), one
  // expert's scratch (its input and output, gate and up: 2 d + 2 I_moe) and a
  // dense layer's gate and up (2 I, when the model has dense layers).
  const uint64_t d = static_cast<uint64_t>(b.hidden_size), I = static_cast<uint64_t>(c.moe_intermediate_size);
  const uint64_t dense = c.moe_layers().size() < static_cast<size_t>(b.num_hidden_layers)
                             ? 2 * static_cast<uint64_t>(b.intermediate_size) : 0;
  m.pass_row_bytes = 4 * (d * (7 + static_cast<uint64_t>(c.num_experts_per_tok)) + 2 * static_cast<uint64_t>(b.q_dim()) +
                          2 * static_cast<uint64_t>(b.kv_dim()) + static_cast<uint64_t>(c.num_experts) + 2 * I + dense) +
                     m.moe_layers.size() * route_bytes(c.num_experts_per_tok);  // its route in every MoE layer
  return m;
}

namespace {

// Marks of this family are plain lengths; another family's carries state
// this one cannot restore. Also refuses a mark past the session's length.
void check_mark(const SessionMark& mark, const Qwen3Session& s) {
  if (typeid(mark) != typeid(SessionMark)) fail("Qwen3-MoE model: the mark belongs to another model family");
  if (mark.length > s.length()) fail("Qwen3-MoE session: the mark is at ", mark.length, ", past the session's ", s.length());
}

}  // namespace

std::unique_ptr<ModelSession> Qwen3MoeModel::new_session() const { return std::make_unique<Qwen3Session>(c_.base); }

std::shared_ptr<SessionMark> Qwen3MoeModel::mark(const ModelSession& session) const {
  auto m = std::make_shared<SessionMark>();
  m->length = qwen3_session(session).length();
  return m;
}

void Qwen3MoeModel::rewind(ModelSession& session, const SessionMark& mark) const {
  Qwen3Session& s = qwen3_session(session);
  check_mark(mark, s);
  s.truncate(mark.length);
}

std::unique_ptr<ModelSession> Qwen3MoeModel::copy_at(const ModelSession& session, const SessionMark& at) const {
  const Qwen3Session& s = qwen3_session(session);
  check_mark(at, s);
  // Only the marked rows: a copy of the whole cache, truncated, would keep
  // the longer allocation while bytes() counts only the rows held.
  auto copy = std::make_unique<Qwen3Session>(c_.base, s.capacity());
  copy->reserve(at.length);
  const size_t n = static_cast<size_t>(at.length * s.kv_dim());
  for (int64_t l = 0; l < s.layers() && n > 0; ++l) {
    std::copy_n(s.keys(l, 0), n, copy->keys(l, 0));
    std::copy_n(s.values(l, 0), n, copy->values(l, 0));
  }
  copy->commit(at.length);
  return copy;
}

uint64_t Qwen3MoeModel::state_values(int64_t length) const {
  return static_cast<uint64_t>(c_.base.num_hidden_layers) * 2 * static_cast<uint64_t>(c_.base.kv_dim()) *
         static_cast<uint64_t>(std::max<int64_t>(length, 0));
}

void Qwen3MoeModel::for_each_state_part(const ModelSession& session, const SessionMark& at,
                                        const StatePartFn& part) const {
  const Qwen3Session& s = qwen3_session(session);
  check_mark(at, s);
  const size_t n = static_cast<size_t>(at.length * s.kv_dim());
  for (int64_t l = 0; l < s.layers(); ++l) {
    part(s.keys(l, 0), n);
    part(s.values(l, 0), n);
  }
}

void Qwen3MoeModel::read_state(ModelSession& fresh, int64_t length, const StateReadFn& read) const {
  Qwen3Session& s = qwen3_session(fresh);
  if (s.length() != 0) fail("Qwen3-MoE session state: restore needs a fresh session");
  s.reserve(length);  // refuses a length past the session's capacity
  const size_t n = static_cast<size_t>(length * s.kv_dim());
  for (int64_t l = 0; l < s.layers(); ++l) {
    read(s.keys(l, 0), n);
    read(s.values(l, 0), n);
  }
  s.commit(length);
}

Rows Qwen3MoeModel::forward_verify(ModelSession& session, std::span<const uint32_t> tokens) {
  verify_start_ = qwen3_session(session).length();
  verify_rows_ = 0;
  verify_session_ = nullptr;
  Rows logits = forward(session, tokens, true);  // a pass that throws commits nothing
  verify_rows_ = tokens.size();
  verify_session_ = &session;
  return logits;
}

void Qwen3MoeModel::keep_verified(ModelSession& session, size_t rows) {
  if (rows == 0 || rows > verify_rows_) fail("verifier: cannot commit ", rows, " rows of a ", verify_rows_, "-row pass");
  if (&session != verify_session_) fail("verifier: keep_verified on another session than the verified pass's");
  qwen3_session(session).truncate(verify_start_ + static_cast<int64_t>(rows));
  verify_rows_ = 0;
  verify_session_ = nullptr;
}

Rows Qwen3MoeModel::forward(ModelSession& model_session, std::span<const uint32_t> tokens, bool all_logits,
                            const PassShape& shape) {
  Qwen3Session& session = qwen3_session(model_session);
  const Qwen3Config& c = c_.base;
  const size_t T = tokens.size();
  if (T == 0) fail("Qwen3-MoE forward: no tokens");
  for (size_t t = 0; t < T; ++t)
    if (tokens[t] >= static_cast<uint64_t>(c.vocab_size))
      fail("Qwen3-MoE forward: token id ", tokens[t], " at offset ", t, " is outside the vocabulary of ", c.vocab_size);
  if (session.layers() != c.num_hidden_layers || session.kv_dim() != c.kv_dim())
    fail("Qwen3-MoE forward: the session was made for another model shape (", session.layers(), " layers, kv_dim ",
         session.kv_dim(), ")");
  const int64_t start = session.length();
  session.reserve(static_cast<int64_t>(T));
  ExpertPass pass(experts_, T);  // ends however this pass does

  const size_t d = c.hidden_size, V = c.vocab_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> cos_t, sin_t;
  qwen3_rope_tables(rope_, start, T, cos_t, sin_t);
  Rows x(T, d), h(T, d), delta(T, d);
  for (size_t t = 0; t < T; ++t)
    for (size_t j = 0; j < d; ++j) x.row(t)[j] = bf16_to_f32(w_.embed.bf16_at(tokens[t], j));
  routes_.assign(static_cast<size_t>(c.num_hidden_layers), {});

  // Asked inside a layer's attention too (a long prompt's is minutes of
  // work), at most once per poll_interval.
  auto polled = std::chrono::steady_clock::now();
  std::function<bool()> stop;
  if (shape.cancelled) stop = [&] {
    const auto now = std::chrono::steady_clock::now();
    if (now - polled < shape.poll_interval) return false;
    polled = now;
    return shape.cancelled();
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    // Abandoned between layers: nothing was committed, so the session still
    // holds exactly what it held before the pass.
    if (shape.cancelled && shape.cancelled()) return Rows();
    if (shape.on_layer) shape.on_layer(l);
    const Qwen3MoeLayerWeights& L = w_.layers[static_cast<size_t>(l)];
    if (!qwen3_attention_block(c, L.attn, l, session, start, T, cos_t.data(), sin_t.data(), x.v.data(), pool_, stop))
      return Rows();  // abandoned inside the layer: nothing committed either
    for (size_t t = 0; t < T; ++t) rmsnorm(x.row(t), L.post_attention_norm.data(), d, eps, h.row(t));
    if (c_.is_moe_layer(l))
      moe(l, h, delta);
    else
      dense_mlp(L, h, delta);
    for (size_t i = 0; i < T * d; ++i) x.v[i] = x.v[i] + delta.v[i];
  }

  const size_t rows = all_logits ? T : 1, first = T - rows;
  Rows normed(rows, d), logits(rows, V);
  for (size_t r = 0; r < rows; ++r) rmsnorm(x.row(first + r), w_.final_norm.data(), d, eps, normed.row(r));
  matmul(w_.output().view(), normed.v.data(), rows, logits.v.data(), pool_);
  session.commit(static_cast<int64_t>(T));
  return logits;
}

}  // namespace deltafin
