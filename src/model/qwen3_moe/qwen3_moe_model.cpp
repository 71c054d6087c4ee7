#include "model/qwen3_moe/qwen3_moe_model.h"

#include "backend/cpu_backend.h"
#include "model/common/pass_driver.h"
#include "util/error.h"

namespace deltafin {

namespace {

// A Qwen3-MoE expert record: gate, up and down projections in BF16, back to
// back as released (qwen3_moe_weights.h's record layout).
ExpertMlp qwen3_moe_expert(const Qwen3MoeConfig& c) {
  ExpertMlp m;
  m.type = WeightType::BF16;
  m.in = m.out = static_cast<size_t>(c.base.hidden_size);
  m.mid = static_cast<size_t>(c.moe_intermediate_size);
  m.gate = 0, m.up = c.expert_tensor_bytes(), m.down = 2 * c.expert_tensor_bytes();
  m.fn = Gate::silu_mul();
  return m;
}

}  // namespace

Qwen3MoeModel::Qwen3MoeModel(const Qwen3MoeConfig& config, const Qwen3MoeWeights& weights, ExpertSource& experts,
                             Backend& backend)
    : KvCacheModel("Qwen3-MoE", config.base.num_hidden_layers, config.base.kv_dim()), c_(config), w_(weights),
      summary_(qwen3_moe_summary(config)), be_(backend),
      experts_(backend, experts, qwen3_moe_expert(config), static_cast<size_t>(config.num_experts)), source_(experts),
      rope_(make_qwen3_rope(config.base)) {
  if (static_cast<int64_t>(weights.layers.size()) != config.base.num_hidden_layers ||
      weights.embed.rows != static_cast<size_t>(config.base.vocab_size) ||
      weights.embed.cols != static_cast<size_t>(config.base.hidden_size))
    fail("Qwen3-MoE model: the weights were not loaded for this config");
}

Qwen3MoeModel::Qwen3MoeModel(const Qwen3MoeConfig& config, const Qwen3MoeWeights& weights, ExpertSource& experts,
                             ThreadPool* pool)
    : Qwen3MoeModel(config, weights, experts, *new CpuBackend(pool)) {
  own_backend_.reset(&be_);
}

Qwen3MoeModel::~Qwen3MoeModel() = default;

std::unique_ptr<KvSession> Qwen3MoeModel::make_session(int64_t capacity) const {
  return std::make_unique<Qwen3Session>(c_.base, capacity);
}

// The routing decision is the host's (the expert source is asked for the
// chosen experts): the router's logits are read back, each row routed into
// the layer's reused Route.
void Qwen3MoeModel::route(int64_t layer, const Act& h) {
  const Qwen3MoeLayerWeights& w = w_.layers[static_cast<size_t>(layer)];
  const size_t T = h.rows(), E = static_cast<size_t>(c_.num_experts);
  Act z = be_.act(T, E);
  be_.matmul(w.router.view(), h, z);
  router_host_.resize(T * E);
  be_.read(z, 0, router_host_);
  std::vector<Route>& routes = routes_[static_cast<size_t>(layer)];
  routes.resize(T);
  for (size_t t = 0; t < T; ++t)
    route_softmax_top_k(std::span(router_host_).subspan(t * E, E), static_cast<size_t>(c_.num_experts_per_tok),
                        c_.norm_topk_prob, route_scratch_, routes[t]);
}

bool Qwen3MoeModel::moe(int64_t layer, const Act& h, Act& out, const std::function<bool()>& stop) {
  route(layer, h);
  return experts_.run(layer, h, 0, routes_[static_cast<size_t>(layer)], out, stop);
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

Rows Qwen3MoeModel::forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
                            const PassShape& shape) {
  const BatchPart part{&session, tokens, all_logits};
  Rows logits;
  run_parts(std::span(&part, 1), shape, std::span(&logits, 1));  // cancelled: logits stay empty
  return logits;
}

std::vector<Rows> Qwen3MoeModel::forward_batch(std::span<const BatchPart> parts, const PassShape& shape) {
  std::vector<Rows> logits(parts.size());
  if (!run_parts(parts, shape, logits)) return {};
  return logits;
}

void Qwen3MoeModel::check_parts(std::span<const BatchPart> parts) {
  const Qwen3Config& c = c_.base;
  for (size_t p = 0; p < parts.size(); ++p) {
    const std::span<const uint32_t> tokens = parts[p].tokens;
    const auto check = [&] {
      if (tokens.empty()) fail("Qwen3-MoE forward: no tokens");
      for (size_t t = 0; t < tokens.size(); ++t)
        if (tokens[t] >= static_cast<uint64_t>(c.vocab_size))
          fail("Qwen3-MoE forward: token id ", tokens[t], " at offset ", t, " is outside the vocabulary of ", c.vocab_size);
    };
    if (parts.size() == 1) check();
    else with_context(cat("batch part ", p), check);
  }
  check_batch_parts(parts);
  sessions_.clear();
  for (const BatchPart& part : parts) sessions_.push_back(&kv_session(*part.session));
}

bool Qwen3MoeModel::run_parts(std::span<const BatchPart> parts, const PassShape& shape, std::span<Rows> out) {
  const Qwen3Config& c = c_.base;
  check_parts(parts);
  batch_.lay_out(parts);
  const size_t P = parts.size(), T = batch_.rows();
  if (rope_rows_.size() < P) rope_rows_.resize(P);
  starts_.clear();
  for (size_t p = 0; p < P; ++p) {
    starts_.push_back(sessions_[p]->length());
    sessions_[p]->reserve(static_cast<int64_t>(batch_.rows(p)));
  }
  PassDriver pass(source_, T, shape);  // ends the expert pass however this pass does

  const size_t d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  for (size_t p = 0; p < P; ++p) rope_rows_[p].fill(be_, rope_, starts_[p], batch_.rows(p));
  Act x = be_.act(T, d), h = be_.act(T, d), delta = be_.act(T, d);
  be_.embed(w_.embed.view(), batch_.tokens(), x);
  routes_.resize(static_cast<size_t>(c.num_hidden_layers));  // dense layers' stay empty

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    // Abandoned between layers or inside one: nothing was committed, so the
    // sessions still hold exactly what they held before the pass.
    if (!pass.begin_layer(l)) return false;
    const Qwen3MoeLayerWeights& L = w_.layers[static_cast<size_t>(l)];
    // Each part's attention adds to its own rows of x, in place.
    const bool attended = attend_by_part(be_, batch_, x, x, [&](size_t p, const Act&, Act& rows) {
      return qwen3_attention_block(be_, c, L.attn, l, *sessions_[p], starts_[p], rope_rows_[p].cos, rope_rows_[p].sin,
                                   rows, pass.poll());
    });
    if (!attended) return false;
    be_.rmsnorm(x, L.post_attention_norm, eps, h);
    if (c_.is_moe_layer(l)) {
      if (!moe(l, h, delta, pass.poll())) return false;
    } else {
      Act g = be_.act(T, L.gate.rows);
      be_.gated_matmul(L.gate.view(), L.up.view(), h, Gate::silu_mul(), g);
      be_.matmul(L.down.view(), g, delta);
    }
    be_.add(x, delta);
  }

  // The rows whose logits are asked for: each part's last, or all of a part's with all_logits.
  const std::span<const uint32_t> tail = batch_.logit_rows();
  Act last = be_.act(tail.size(), d), logits = be_.act(tail.size(), c.vocab_size);
  be_.gather(x, tail, last);
  be_.rmsnorm(last, w_.final_norm, eps, last);
  be_.matmul(w_.output().view(), last, logits);
  batch_.read_logits(be_, logits, out);
  for (size_t p = 0; p < P; ++p) sessions_[p]->commit(static_cast<int64_t>(batch_.rows(p)));
  return true;
}

}  // namespace deltafin
