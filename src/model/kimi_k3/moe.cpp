// Latent MoE (k3-model.md §7.7): sigmoid-plus-bias routing, the routed experts
// in the 32..3584-wide latent, summed in the decided order, plus the fused
// shared experts on the hidden input.
#include <algorithm>
#include <map>

#include "model/kimi_k3/tensors.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "backend/expert_group.h"
#include "model/kimi_k3/lookahead.h"
#include "model/kimi_k3/model.h"

namespace deltafin {

Route K3Model::route(const MoeWeights& w, const float* z) const {
  const size_t E = static_cast<size_t>(c_.num_experts), k = static_cast<size_t>(c_.num_experts_per_token);
  std::vector<float> sigma(E), choice(E);
  for (size_t e = 0; e < E; ++e) {
    sigma[e] = sigmoid(z[e]);
    choice[e] = sigma[e] + w.correction_bias[e];
  }
  // Decision (§7.7): descending choice, ties to the lower id (model/common/greedy.h).
  Route r;
  r.experts = top_k_experts(choice.data(), E, k);
  float den = 0.0f;
  for (int64_t e : r.experts) den = den + sigma[static_cast<size_t>(e)];
  den = den + 1e-20f;
  for (int64_t e : r.experts) r.weights.push_back(sigma[static_cast<size_t>(e)] / den);
  return r;
}

void K3Model::moe(int64_t layer, const Rows& x, Rows& out, size_t slice_rows) {
  const MoeWeights& w = w_.layers[static_cast<size_t>(layer)].moe;
  const size_t T = x.T, E = static_cast<size_t>(c_.num_experts);
  const size_t lat = static_cast<size_t>(c_.routed_expert_hidden_size);

  // Every row is routed first, so the layer's whole union is known before any
  // expert is asked for, even when the experts then run slice by slice.
  Rows z(T, E), zl(T, lat);
  matmul(w.router.view(), x.v.data(), T, z.v.data(), pool_);
  matmul(w.latent_down.view(), x.v.data(), T, zl.v.data(), pool_);
  std::vector<Route>& routes = routes_[static_cast<size_t>(layer)];
  routes.clear();
  for (size_t t = 0; t < T; ++t) routes.push_back(route(w, z.row(t)));
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
void K3Model::moe_rows(int64_t layer, const Rows& x, const Rows& zl, size_t r0, size_t n, Rows& out) {
  const MoeWeights& w = w_.layers[static_cast<size_t>(layer)].moe;
  const size_t k = static_cast<size_t>(c_.num_experts_per_token), d = out.n;
  const size_t lat = static_cast<size_t>(c_.routed_expert_hidden_size), mid = static_cast<size_t>(c_.moe_intermediate_size);
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const std::vector<Route>& routes = routes_[static_cast<size_t>(layer)];

  // Each expert is fetched once and applied to every row routed to it, as one
  // batched product (the kernels make that equal to per-row products). The
  // source hands experts over as they become available (hits first, misses as
  // they land); each result goes to its own (row, slot) place and the combine
  // below runs in the decided order, so arrival order cannot change a bit.
  std::map<int64_t, std::vector<std::pair<size_t, size_t>>> users;  // expert -> (row in slice, slot)
  for (size_t t = 0; t < n; ++t)
    for (size_t i = 0; i < k; ++i) users[routes[r0 + t].experts[i]].push_back({t, i});
  std::vector<int64_t> needed;
  std::vector<const std::vector<std::pair<size_t, size_t>>*> needed_rows;
  for (const auto& [e, rows] : users) needed.push_back(e), needed_rows.push_back(&rows);
  std::vector<float> expert_out(n * k * lat);  // [row][slot][lat]
  const uint64_t w1 = mid * lat / 2, s1 = mid * lat / 32, w2 = lat * mid / 2, s2 = lat * mid / 32;
  // One expert's MLP on its rows; runs on whichever thread compute_expert_group
  // gives it, so it touches nothing but its own buffers and its expert_out places.
  auto compute = [&](const ReadyExpert& ready) {
    const auto& rows = *needed_rows[ready.index];
    const uint8_t* p = ready.record;
    WeightView W1{WeightType::MXFP4, mid, lat, p, p + w1};
    WeightView W2{WeightType::MXFP4, lat, mid, p + w1 + s1, p + w1 + s1 + w2};
    WeightView W3{WeightType::MXFP4, mid, lat, p + w1 + s1 + w2 + s2, p + w1 + s1 + w2 + s2 + w1};
    const size_t m = rows.size();
    Rows in(m, lat), g(m, mid), u(m, mid), hid(m, mid), y(m, lat);
    for (size_t j = 0; j < m; ++j) std::copy(zl.row(r0 + rows[j].first), zl.row(r0 + rows[j].first) + lat, in.row(j));
    gated_situ(W1, W3, in.v.data(), m, g, u, hid);
    matmul(W2, hid.v.data(), m, y.v.data(), pool_);
    for (size_t j = 0; j < m; ++j)
      std::copy(y.row(j), y.row(j) + lat, expert_out.data() + (rows[j].first * k + rows[j].second) * lat);
  };
  experts_.for_each_ready_group(layer, needed, [&](std::span<const ReadyExpert> group) {
    // Cancelled: the source still hands over every expert (its reads land),
    // but none is computed; the pass unwinds right after.
    if (cancel_requested()) return;
    std::vector<size_t> rows_per_expert;
    for (const ReadyExpert& r : group) rows_per_expert.push_back(needed_rows[r.index]->size());
    compute_expert_group(pool_, rows_per_expert, [&](size_t j) { compute(group[j]); });
  });

  stop_if_cancelled();

  // r = sum_i out_i * w_i in the decided order: each product rounded, then added.
  Rows r(n, lat), routed(n, d);
  for (size_t t = 0; t < n; ++t) {
    float* rt = r.row(t);
    for (size_t i = 0; i < k; ++i) {
      const float* oi = expert_out.data() + (t * k + i) * lat;
      const float wi = routes[r0 + t].weights[i];
      for (size_t c = 0; c < lat; ++c) {
        const float prod = oi[c] * wi;
        rt[c] = rt[c] + prod;
      }
    }
    rmsnorm(rt, w.latent_norm.data(), lat, eps, rt);
  }
  matmul(w.latent_up.view(), r.v.data(), n, routed.v.data(), pool_);

  const size_t S = w.shared_gate.rows;
  const float* xs = x.row(r0);
  Rows sg(n, S), su(n, S), sh(n, S), shared(n, d);
  gated_situ(w.shared_gate.view(), w.shared_up.view(), xs, n, sg, su, sh);
  matmul(w.shared_down.view(), sh.v.data(), n, shared.v.data(), pool_);
  float* o = out.row(r0);
  for (size_t j = 0; j < n * d; ++j) o[j] = routed.v[j] + shared.v[j];
}

}  // namespace deltafin
