// Latent MoE (k3-model.md §7.7): sigmoid-plus-bias routing, the routed experts
// in the 32..3584-wide latent (the shared routed-experts block), their sum
// normed and projected back up, plus the fused shared experts on the hidden
// input.
#include <algorithm>

#include "model/kimi_k3/lookahead.h"
#include "model/kimi_k3/model.h"
#include "model/kimi_k3/tensors.h"

namespace deltafin {

// A K3 expert record (k3-model.md §5.1): gate_proj [mid, lat], down_proj
// [lat, mid], up_proj [mid, lat], each MXFP4 values then its e8m0 scales.
ExpertMlp k3_expert(const K3Config& c) {
  const uint64_t mid = static_cast<uint64_t>(c.moe_intermediate_size), lat = static_cast<uint64_t>(c.routed_expert_hidden_size);
  const uint64_t values = mid * lat / 2, scales = mid * lat / 32;
  ExpertMlp m;
  m.type = WeightType::MXFP4;
  m.in = m.out = static_cast<size_t>(lat);
  m.mid = static_cast<size_t>(mid);
  m.gate = 0, m.gate_scales = values;
  m.down = values + scales, m.down_scales = m.down + values;
  m.up = m.down_scales + scales, m.up_scales = m.up + values;
  m.fn = Gate::situ(static_cast<float>(c.situ_beta), static_cast<float>(c.situ_linear_beta));
  return m;
}

void K3Model::moe(int64_t layer, const Act& x, Act& out, size_t slice_rows) {
  const MoeWeights& w = w_.layers[static_cast<size_t>(layer)].moe;
  const size_t T = x.rows(), E = static_cast<size_t>(c_.num_experts);
  const size_t lat = static_cast<size_t>(c_.routed_expert_hidden_size), k = static_cast<size_t>(c_.num_experts_per_token);

  // Every row is routed first, so the layer's whole union is known before any
  // expert is asked for, even when the experts then run slice by slice.
  Act z = be_.act(T, E), zl = be_.act(T, lat);
  be_.matmul(w.router.view(), x, z);
  be_.matmul(w.latent_down.view(), x, zl);
  router_host_.resize(T * E);
  be_.read(z, 0, router_host_);
  std::vector<Route>& routes = routes_[static_cast<size_t>(layer)];
  routes.resize(T);
  for (size_t t = 0; t < T; ++t)
    route_sigmoid_bias_top_k(std::span(router_host_).subspan(t * E, E), w.correction_bias, k, route_scratch_, routes[t]);
  if (lookahead_) lookahead_->observe(layer, routes);

  const size_t S = slice_rows == 0 || slice_rows > T ? T : slice_rows;
  const size_t slices = (T + S - 1) / S;
  if (slices > 1) {
    std::vector<bool> used(E, false);
    std::vector<int64_t> union_experts;
    for (const Route& r : routes)
      for (int64_t e : r.experts) used[static_cast<size_t>(e)] = true;
    for (size_t e = 0; e < E; ++e)
      if (used[e]) union_experts.push_back(static_cast<int64_t>(e));
    experts_.begin_layer(layer, union_experts, slices);
  }
  for (size_t r0 = 0; r0 < T; r0 += S) {
    moe_rows(layer, x, zl, r0, std::min(S, T - r0), out);
    stop_if_cancelled();
  }
}

// Rows [r0, r0 + n) of the MoE output: their routed experts (each fetched once
// for the slice and applied to all its rows there) and the shared experts.
void K3Model::moe_rows(int64_t layer, const Act& x, const Act& zl, size_t r0, size_t n, Act& out) {
  const MoeWeights& w = w_.layers[static_cast<size_t>(layer)].moe;
  const size_t d = out.width(), lat = zl.width(), S = w.shared_gate.rows;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const std::span<const Route> routes = std::span(routes_[static_cast<size_t>(layer)]).subspan(r0, n);

  // r = sum_i out_i * w_i in the decided order, then normed and projected up.
  Act r = be_.act(n, lat), routed = be_.act(n, d);
  if (!routed_.run(layer, zl, r0, routes, r, pass_->poll())) stop_if_cancelled();
  be_.rmsnorm(r, w.latent_norm, eps, r);
  be_.matmul(w.latent_up.view(), r, routed);

  Act xs = be_.act(n, d), sh = be_.act(n, S), shared = be_.act(n, d);
  be_.copy_rows(x, r0, xs);
  be_.gated_matmul(w.shared_gate.view(), w.shared_up.view(), xs, routed_.mlp().fn, sh);
  be_.matmul(w.shared_down.view(), sh, shared);
  be_.add(routed, shared);  // routed + shared: fp addition commutes, so the order of the terms is free
  be_.place_rows(routed, r0, out);
}

}  // namespace deltafin
