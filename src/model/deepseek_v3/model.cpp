#include "model/deepseek_v3/model.h"

#include "backend/cpu_backend.h"
#include "model/common/pass_driver.h"
#include "model/deepseek_v3/expert_record.h"
#include "util/error.h"

namespace deltafin {

namespace {

// A routed expert as its record holds it (expert_record.h): SwiGLU over
// gate, up and down in the release's type, their scales after the values.
ExpertMlp deepseek_v3_expert(const DeepseekV3Config& c) {
  const DsExpertLayout L = ds_expert_layout(c);
  ExpertMlp m;
  m.type = L.type;
  m.in = m.out = static_cast<size_t>(c.hidden_size);
  m.mid = static_cast<size_t>(c.moe_intermediate_size);
  m.gate = L.gate, m.up = L.up, m.down = L.down;
  m.gate_scales = L.gate_scales, m.up_scales = L.up_scales, m.down_scales = L.down_scales;
  m.fn = Gate::silu_mul();
  return m;
}

GroupedRouting grouped_routing(const DeepseekV3Config& c) {
  GroupedRouting r;
  r.k = static_cast<size_t>(c.num_experts_per_tok);
  r.n_group = static_cast<size_t>(c.n_group);
  r.topk_group = static_cast<size_t>(c.topk_group);
  r.normalize = c.norm_topk_prob;
  r.scale = static_cast<float>(c.routed_scaling_factor);
  return r;
}

int64_t latent_width(const DeepseekV3Config& c) { return c.kv_lora_rank + c.qk_rope_head_dim; }

}  // namespace

DeepseekV3Model::DeepseekV3Model(const DeepseekV3Config& config, const DeepseekV3Weights& weights,
                                 ExpertSource& experts, Backend& backend)
    : KvCacheModel(config.model_type, config.num_hidden_layers, latent_width(config), 1), c_(config), w_(weights),
      summary_(deepseek_v3_summary(config)), be_(backend),
      experts_(backend, experts, deepseek_v3_expert(config), static_cast<size_t>(config.n_routed_experts)),
      source_(experts), dims_(deepseek_v3_mla_dims(config)), rule_(grouped_routing(config)),
      rope_(make_rope(config.qk_rope_head_dim, config.rope_theta, config.yarn)) {
  if (static_cast<int64_t>(weights.layers.size()) != config.num_hidden_layers ||
      weights.embed.rows != static_cast<size_t>(config.vocab_size) ||
      weights.embed.cols != static_cast<size_t>(config.hidden_size))
    fail(config.model_type, " model: the weights were not loaded for this config");
}

DeepseekV3Model::DeepseekV3Model(const DeepseekV3Config& config, const DeepseekV3Weights& weights,
                                 ExpertSource& experts, ThreadPool* pool)
    : DeepseekV3Model(config, weights, experts, *new CpuBackend(pool)) {
  own_backend_.reset(&be_);
}

DeepseekV3Model::~DeepseekV3Model() = default;

std::unique_ptr<KvSession> DeepseekV3Model::make_session(int64_t capacity) const {
  return std::make_unique<KvSession>(c_.num_hidden_layers, latent_width(c_),
                                     capacity > 0 ? capacity : c_.max_position_embeddings, 1);
}

uint64_t deepseek_v3_bytes_per_position(const DeepseekV3Config& c) {
  return KvSession::bytes_per_position(c.num_hidden_layers, latent_width(c), 1);
}

ModelSummary deepseek_v3_summary(const DeepseekV3Config& c) {
  ModelSummary m;
  m.family = "deepseek_v3";
  m.layers = c.num_hidden_layers;
  m.vocab = c.vocab_size;
  m.context = c.max_position_embeddings;
  m.moe_layers = c.moe_layers();
  m.experts = c.n_routed_experts;
  m.top_k = c.num_experts_per_tok;
  m.expert_record_bytes = c.expert_record_bytes();
  m.session_fixed_bytes = 0;
  m.session_bytes_per_position = deepseek_v3_bytes_per_position(c);
  // Per position of a pass: x, h, the MLA/MLP output and the shared
  // experts' (4 rows of d); the MLA's query, q_rope, latent, absorbed
  // queries, weighted latents and outputs (H·dk + H·rope + 2·R + H·R +
  // H·r_kv + H·dv + r_q); the router's logits; the k expert outputs; one
  // expert's or the dense MLP's scratch (2·d + 2·max(I_moe·n_shared, I)).
  const uint64_t d = c.hidden_size, H = c.num_attention_heads, R = latent_width(c);
  const uint64_t mla = H * c.qk_head_dim() + H * c.qk_rope_head_dim + 2 * R + H * R + H * c.kv_lora_rank +
                       H * c.v_head_dim + c.q_lora_rank;
  const uint64_t mid = std::max<uint64_t>(c.moe_intermediate_size * std::max<int64_t>(c.n_shared_experts, 1),
                                          c.first_k_dense_replace > 0 ? c.intermediate_size : 0);
  m.pass_row_bytes = 4 * (d * (6 + static_cast<uint64_t>(c.num_experts_per_tok)) + mla + c.n_routed_experts + 2 * mid) +
                     m.moe_layers.size() * route_bytes(c.num_experts_per_tok);
  return m;
}

// The routing decision is the host's (the expert source is asked for the
// chosen experts): the router's fp32 logits are read back and each row
// routed into the layer's reused Route.
void DeepseekV3Model::route(int64_t layer, const Act& h) {
  const DsLayerWeights& w = w_.layers[static_cast<size_t>(layer)];
  const size_t T = h.rows(), E = static_cast<size_t>(c_.n_routed_experts);
  Act z = be_.act(T, E);
  be_.matmul(w.router.view(), h, z);
  router_host_.resize(T * E);
  be_.read(z, 0, router_host_);
  std::vector<Route>& routes = routes_[static_cast<size_t>(layer)];
  routes.resize(T);
  for (size_t t = 0; t < T; ++t)
    route_sigmoid_grouped_top_k(std::span(router_host_).subspan(t * E, E), w.router_bias, rule_, route_scratch_,
                                routes[t]);
}

// The MLP half on h = rmsnorm(x): out = the dense SwiGLU, or the routed
// experts' weighted sum plus the shared experts (added after, as
// DeepseekV3MoE returns moe(h) + shared_experts(h)).
bool DeepseekV3Model::mlp(int64_t layer, const Act& h, Act& out, const std::function<bool()>& stop) {
  const DsLayerWeights& L = w_.layers[static_cast<size_t>(layer)];
  const size_t T = h.rows();
  auto swiglu = [&](const DsMlp& m, Act& y) {
    Act g = be_.act(T, m.gate.rows);
    be_.gated_matmul(m.gate.view(), m.up.view(), h, Gate::silu_mul(), g);
    be_.matmul(m.down.view(), g, y);
  };
  if (!c_.is_moe_layer(layer)) {
    swiglu(L.dense, out);
    return true;
  }
  route(layer, h);
  if (!experts_.run(layer, h, 0, routes_[static_cast<size_t>(layer)], out, stop)) return false;
  if (L.shared.gate.rows) {
    Act shared = be_.act(T, static_cast<size_t>(c_.hidden_size));
    swiglu(L.shared, shared);
    be_.add(out, shared);
  }
  return true;
}

Rows DeepseekV3Model::forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
                              const PassShape& shape) {
  const BatchPart part{&session, tokens, all_logits};
  Rows logits;
  run_parts(std::span(&part, 1), shape, std::span(&logits, 1));  // cancelled: logits stay empty
  return logits;
}

std::vector<Rows> DeepseekV3Model::forward_batch(std::span<const BatchPart> parts, const PassShape& shape) {
  std::vector<Rows> logits(parts.size());
  if (!run_parts(parts, shape, logits)) return {};
  return logits;
}

void DeepseekV3Model::check_parts(std::span<const BatchPart> parts) {
  for (size_t p = 0; p < parts.size(); ++p) {
    const std::span<const uint32_t> tokens = parts[p].tokens;
    const auto check = [&] {
      if (tokens.empty()) fail(c_.model_type, " forward: no tokens");
      for (size_t t = 0; t < tokens.size(); ++t)
        if (tokens[t] >= static_cast<uint64_t>(c_.vocab_size))
          fail(c_.model_type, " forward: token id ", tokens[t], " at offset ", t, " is outside the vocabulary of ",
               c_.vocab_size);
    };
    if (parts.size() == 1) check();
    else with_context(cat("batch part ", p), check);
  }
  check_batch_parts(parts);
  sessions_.clear();
  for (const BatchPart& part : parts) sessions_.push_back(&kv_session(*part.session));
}

bool DeepseekV3Model::run_parts(std::span<const BatchPart> parts, const PassShape& shape, std::span<Rows> out) {
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

  const size_t d = static_cast<size_t>(c_.hidden_size);
  const float eps = static_cast<float>(c_.rms_norm_eps);
  for (size_t p = 0; p < P; ++p) rope_rows_[p].fill(be_, rope_, starts_[p], batch_.rows(p));
  Act x = be_.act(T, d), h = be_.act(T, d), delta = be_.act(T, d);
  be_.embed(w_.embed.view(), batch_.tokens(), x);
  routes_.resize(static_cast<size_t>(c_.num_hidden_layers));  // dense layers' stay empty

  for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
    // Abandoned between layers or inside one: nothing was committed, so the
    // sessions still hold exactly what they held before the pass.
    if (!pass.begin_layer(l)) return false;
    const DsLayerWeights& L = w_.layers[static_cast<size_t>(l)];
    be_.rmsnorm(x, L.input_norm, eps, h);
    const bool attended = attend_by_part(be_, batch_, h, delta, [&](size_t p, const Act& rows, Act& rows_out) {
      const MlaRope rope{&rope_rows_[p].cos, &rope_rows_[p].sin};
      return mla_attention(be_, dims_, L.mla, sessions_[p]->latent(l, dims_.rank), starts_[p], rows, rows_out, rope,
                           pass.poll());
    });
    if (!attended) return false;
    be_.add(x, delta);
    be_.rmsnorm(x, L.post_attention_norm, eps, h);
    if (!mlp(l, h, delta, pass.poll())) return false;
    be_.add(x, delta);
  }

  // The rows whose logits are asked for: each part's last, or all of a part's with all_logits.
  const std::span<const uint32_t> tail = batch_.logit_rows();
  Act last = be_.act(tail.size(), d), logits = be_.act(tail.size(), static_cast<size_t>(c_.vocab_size));
  be_.gather(x, tail, last);
  be_.rmsnorm(last, w_.final_norm, eps, last);
  be_.matmul(w_.lm_head.view(), last, logits);
  batch_.read_logits(be_, logits, out);
  for (size_t p = 0; p < P; ++p) sessions_[p]->commit(static_cast<int64_t>(batch_.rows(p)));
  return true;
}

}  // namespace deltafin
