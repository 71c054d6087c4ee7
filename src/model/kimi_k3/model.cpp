#include "model/kimi_k3/model.h"

#include <algorithm>

#include "model/kimi_k3/tensors.h"
#include "model/kimi_k3/lookahead.h"
#include "model/kimi_k3/session_file.h"
#include "backend/cpu_backend.h"
#include "util/error.h"

namespace deltafin {

K3Model::K3Model(const K3Config& config, const K3Weights& weights, ExpertSource& experts, Backend& backend)
    : c_(config), w_(weights), summary_(k3_summary(config)), experts_(experts), be_(backend),
      routed_(backend, experts, k3_expert(config), static_cast<size_t>(config.num_experts)) {}

K3Model::K3Model(const K3Config& config, const K3Weights& weights, ExpertSource& experts, ThreadPool* pool)
    : K3Model(config, weights, experts, *new CpuBackend(pool)) {
  own_backend_.reset(&be_);
}

K3Model::~K3Model() = default;

void K3Model::mix(const std::vector<Act>& anchors, const Act& last, const std::vector<float>& s, Act& out) {
  if (anchors.empty()) {
    be_.copy(last, out);  // a mix over one value is that value (bits included, -0 too)
    return;
  }
  std::vector<const Act*>& values = mix_values_;  // reused: a decoded token allocates nothing here
  values.clear();
  for (const Act& a : anchors) values.push_back(&a);
  values.push_back(&last);
  be_.depth_mix(values, s, static_cast<float>(c_.rms_norm_eps), out);
}

bool K3Model::cancel_requested() { return pass_ && pass_->cancel_requested(); }

void K3Model::stop_if_cancelled() {
  if (cancel_requested()) throw PassCancelled{};
}

// SiTU runs on each thread's rows as its products finish (Backend::gated_matmul).
void K3Model::dense_mlp(const LayerWeights& w, const Act& x, Act& out, size_t slice_rows) {
  const size_t T = x.rows(), I = w.dense.gate.rows, S = slice_rows == 0 || slice_rows > T ? T : slice_rows;
  const Gate situ = Gate::situ(static_cast<float>(c_.situ_beta), static_cast<float>(c_.situ_linear_beta));
  for (size_t r0 = 0; r0 < T; r0 += S) {
    const size_t n = std::min(S, T - r0);
    Act hid = be_.act(n, I);
    if (n == T) {
      be_.gated_matmul(w.dense.gate.view(), w.dense.up.view(), x, situ, hid);
      be_.matmul(w.dense.down.view(), hid, out);
    } else {
      Act xs = be_.act(n, x.width()), os = be_.act(n, out.width());
      be_.copy_rows(x, r0, xs);
      be_.gated_matmul(w.dense.gate.view(), w.dense.up.view(), xs, situ, hid);
      be_.matmul(w.dense.down.view(), hid, os);
      be_.place_rows(os, r0, out);
    }
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
void K3Model::attention_sliced(int64_t layer, K3Session& s, const Act& x, Act& out, size_t slice_rows) {
  const bool kda = c_.layer_kinds[static_cast<size_t>(layer)] == LayerKind::KDA;
  const size_t T = x.rows();
  if (slice_rows == 0 || slice_rows >= T) {
    if (kda) attention_kda(layer, s, x, out);
    else attention_mla(layer, s, x, out, 0);
    return;
  }
  if (kda && kda_log_) fail("forward: a KDA step log covers one unsliced pass");
  for (size_t r0 = 0; r0 < T; r0 += slice_rows) {
    const size_t n = std::min(slice_rows, T - r0);
    Act xs = be_.act(n, x.width()), os = be_.act(n, out.width());
    be_.copy_rows(x, r0, xs);
    if (kda) attention_kda(layer, s, xs, os);
    else attention_mla(layer, s, xs, os, r0);
    be_.place_rows(os, r0, out);
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
  const BatchPart part{&session, tokens, all_logits};
  Rows logits;
  forward_k3(std::span(&part, 1), shape, std::span(&logits, 1));  // cancelled: logits stay empty
  return logits;
}

std::vector<Rows> K3Model::forward_batch(std::span<const BatchPart> parts, const PassShape& shape) {
  std::vector<Rows> logits(parts.size());
  if (!forward_k3(parts, shape, logits)) return {};
  return logits;
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
  K3Session::Verification& v = s.verification();
  // The KDA state is fixed-size: copying it costs one pass over it, far less
  // than the pass; the MLA caches are only cut, never copied.
  v.before = s.snapshot();
  v.rows = 0;
  set_kda_log(&v.log);
  Rows logits;
  try {
    logits = forward(s, tokens, true);
  } catch (...) {
    set_kda_log(nullptr);
    s.restore(v.before);  // a failed pass (e.g. an expert read error) leaves the session as it was
    v = K3Session::Verification{};
    throw;
  }
  set_kda_log(nullptr);
  v.rows = tokens.size();
  return logits;
}

void K3Model::keep_verified(ModelSession& session, size_t rows) {
  K3Session& s = k3_session(session);
  K3Session::Verification& v = s.verification();
  if (rows == 0 || rows > v.rows) fail("verifier: cannot commit ", rows, " rows of a ", v.rows, "-row pass");
  if (rows < v.rows) {  // else every row kept: the pass left the session exactly right
    s.rollback(v.before, v.before.length + static_cast<int64_t>(rows));
    replay_kda(s, v.log, rows);
  }
  v = K3Session::Verification{};
}

void K3Model::check_parts(std::span<const BatchPart> parts) {
  for (size_t p = 0; p < parts.size(); ++p) {
    const std::span<const uint32_t> tokens = parts[p].tokens;
    const auto check = [&] {
      if (tokens.empty()) fail("forward: no tokens");
      const auto outside = std::find_if(tokens.begin(), tokens.end(), [&](uint32_t id) { return id >= static_cast<uint32_t>(c_.vocab_size); });
      if (outside != tokens.end()) fail("forward: token id ", *outside, " outside the vocabulary of ", c_.vocab_size);
    };
    if (parts.size() == 1) check();
    else with_context(cat("batch part ", p), check);
  }
  check_batch_parts(parts);
  if (kda_log_ && parts.size() > 1) fail("forward: a KDA step log covers one session's pass, not a batch of ", parts.size());
  part_sessions_.clear();
  for (const BatchPart& part : parts) part_sessions_.push_back(&k3_session(*part.session));
}

bool K3Model::forward_k3(std::span<const BatchPart> parts, const PassShape& shape, std::span<Rows> out) {
  check_parts(parts);
  batch_.lay_out(parts);
  const size_t T = batch_.rows(), d = static_cast<size_t>(c_.hidden_size);
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const int64_t B = c_.attn_res_block_size;

  // h: the current block-partial sum per position; anchors: completed block sums.
  Act h = be_.act(T, d);
  be_.embed(w_.embed.view(), batch_.tokens(), h);
  // The anchors' list is the model's, reused; its Acts go back to the pool
  // however the pass ends.
  std::vector<Act>& anchors = anchors_;
  anchors.clear();
  struct ReleaseAnchors {
    std::vector<Act>& a;
    ~ReleaseAnchors() { a.clear(); }
  } release_anchors{anchors};
  routes_.resize(static_cast<size_t>(c_.num_hidden_layers));  // layer 0's stays empty
  if (kda_log_) {
    kda_log_->rows = T;
    kda_log_->layers.resize(static_cast<size_t>(c_.num_hidden_layers));
  }
  // The expert pass ends however this pass does (a cancellation, an expert
  // read error), or below, once the layers are done. K3 tells on_layer
  // before it asks `cancelled` (the driver asks first): a server pings on
  // every ask, so the ask right after a layer's report carries that report,
  // the last layer's included. So the driver gets the shape without
  // on_layer (its cancelled forwarded through one captured reference, which
  // std::function keeps without allocating) and the loop tells on_layer.
  PassShape driver_shape;
  driver_shape.slice_rows = shape.slice_rows;
  driver_shape.poll_interval = shape.poll_interval;
  if (shape.cancelled) driver_shape.cancelled = [&shape] { return shape.cancelled(); };
  PassDriver pass(experts_, T, driver_shape);
  // Layer 1 has no PILOT prediction (layer 0 has no router): the previous
  // token's layer-1 route is the hint, read while layer 0 runs.
  if (lookahead_) {
    std::vector<int64_t> first = lookahead_->plan_first_layer();
    if (!first.empty()) experts_.prefetch(1, first);
  }

  Act x_attn = be_.act(T, d), normed = be_.act(T, d), a = be_.act(T, d), p = be_.act(T, d), x_mlp = be_.act(T, d),
      f = be_.act(T, d);
  const size_t n_capture = capture_layers_.size();
  captured_ = n_capture ? Rows(T, n_capture * d) : Rows();
  Act capture = n_capture ? be_.act(T, n_capture * d) : Act();

  // Cancellation inside a layer unwinds to here (PassCancelled, thrown only
  // between whole units of work); the session is then part-way and the
  // caller restores the snapshot it took.
  struct PassGuard {
    K3Model& m;
    ~PassGuard() { m.pass_ = nullptr; }
  } guard{*this};
  pass_ = &pass;
  try {
  for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
    if (shape.on_layer) shape.on_layer(i);
    if (!pass.begin_layer(i)) return false;
    const LayerWeights& lw = w_.layers[static_cast<size_t>(i)];
    mix(anchors, h, lw.s_attn, x_attn);
    const bool block_start = i % B == 0;
    if (block_start) {
      anchors.push_back(be_.act(T, d));
      be_.copy(h, anchors.back());
    }

    be_.rmsnorm(x_attn, lw.input_norm, eps, normed);
    attend_by_part(be_, batch_, normed, a, [&](size_t p, const Act& x, Act& y) {
      attention_sliced(i, *part_sessions_[p], x, y, shape.slice_rows);  // a cancel throws PassCancelled
      return true;
    });

    if (block_start) {
      std::swap(p, a);  // p = a; a is overwritten next layer
    } else {
      be_.copy(h, p);
      be_.add(p, a);  // p = h + a
    }
    mix(anchors, p, lw.s_mlp, x_mlp);
    // Predict layer i+1's experts from this x_mlp and start their reads now,
    // so they overlap this layer's reads and compute (§11). The predictor
    // runs on the host: it reads x_mlp.
    if (lookahead_ && i + 1 < c_.num_hidden_layers && c_.is_moe_layer(i + 1) && i >= 1) {
      Rows& x_host = lookahead_rows_;
      x_host.T = T, x_host.n = d;
      x_host.v.resize(T * d);
      be_.read(x_mlp, 0, x_host.v);
      std::vector<int64_t> next = lookahead_->plan(i + 1, x_host);
      if (!next.empty()) experts_.prefetch(i + 1, next);
    }
    be_.rmsnorm(x_mlp, lw.post_attention_norm, eps, normed);
    if (c_.is_moe_layer(i))
      moe(i, normed, f, shape.slice_rows);
    else
      dense_mlp(lw, normed, f, shape.slice_rows);
    be_.add(p, f);
    std::swap(h, p);  // h = p + f; p is rewritten before it is read again
    for (size_t k = 0; k < n_capture; ++k)
      if (capture_layers_[k] == i) be_.round_bf16(h, capture, k * d);
  }
  } catch (const PassCancelled&) {
    return false;
  }
  for (size_t p = 0; p < batch_.parts(); ++p) part_sessions_[p]->advance(static_cast<int64_t>(batch_.rows(p)));
  pass.end_experts();
  if (n_capture) be_.read(capture, 0, captured_.v);

  // Tail: Mix over the anchors and h, final norm, lm_head, on the rows whose
  // logits are asked for (each part's last, or all of a part's with all_logits).
  const std::span<const uint32_t> tail = batch_.logit_rows();
  const size_t rows = tail.size();
  Act m = be_.act(rows, d), logits_act = be_.act(rows, static_cast<size_t>(c_.vocab_size));
  if (batch_.every_row_has_logits()) {
    mix(anchors, h, w_.s_out, m);
  } else {
    std::vector<Act> last_anchors;
    for (const Act& an : anchors) {
      last_anchors.push_back(be_.act(rows, d));
      be_.gather(an, tail, last_anchors.back());
    }
    Act last_h = be_.act(rows, d);
    be_.gather(h, tail, last_h);
    mix(last_anchors, last_h, w_.s_out, m);
  }
  be_.rmsnorm(m, w_.final_norm, eps, m);
  be_.matmul(w_.lm_head.view(), m, logits_act);
  batch_.read_logits(be_, logits_act, out);
  return true;
}

}  // namespace deltafin
