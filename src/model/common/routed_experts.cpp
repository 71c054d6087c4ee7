#include "model/common/routed_experts.h"

#include "util/error.h"

namespace deltafin {

namespace {
WeightView view(const ExpertMlp& m, const uint8_t* record, uint64_t values, uint64_t scales, size_t rows, size_t cols) {
  const bool scaled =
      m.type == WeightType::MXFP4 || m.type == WeightType::FP8Block || m.type == WeightType::Int4Group32;
  return WeightView{m.type, rows, cols, record + values, scaled ? record + scales : nullptr};
}
}  // namespace

WeightView ExpertMlp::gate_view(const uint8_t* r) const { return view(*this, r, gate, gate_scales, mid, in); }
WeightView ExpertMlp::up_view(const uint8_t* r) const { return view(*this, r, up, up_scales, mid, in); }
WeightView ExpertMlp::down_view(const uint8_t* r) const { return view(*this, r, down, down_scales, out, mid); }

// Layer in bits 40-63, expert in 8-39, the part + 1 in 0-7 (never 0).
uint64_t expert_weight_key(int64_t layer, int64_t expert, int part) {
  return (static_cast<uint64_t>(layer) << 40) | (static_cast<uint64_t>(expert) << 8) | static_cast<uint64_t>(part + 1);
}

RoutedExperts::RoutedExperts(Backend& backend, ExpertSource& source, ExpertMlp mlp, size_t num_experts)
    : be_(backend), source_(source), mlp_(mlp), num_experts_(num_experts), count_(num_experts, 0) {}

// A counting sort of the (row, slot) users by expert: the same needed list
// (ascending ids) and per-expert order (row, then slot) an ordered map gave.
void RoutedExperts::plan(std::span<const Route> routes, size_t first) {
  const size_t k = routes.empty() ? 0 : routes[0].experts.size();
  // Every route is checked before any is counted: a refused call must leave
  // the counts clean for the next one (the model keeps its block).
  for (const Route& r : routes) {
    if (r.experts.size() != k) fail("routed experts: routes of ", k, " and ", r.experts.size(), " experts in one call");
    if (r.weights.size() != k) fail("routed experts: a route of ", k, " experts with ", r.weights.size(), " weights");
    for (int64_t e : r.experts)
      if (e < 0 || static_cast<size_t>(e) >= num_experts_) fail("routed experts: expert ", e, " of ", num_experts_);
  }
  for (const Route& r : routes)
    for (int64_t e : r.experts) ++count_[static_cast<size_t>(e)];
  needed_.clear();
  begin_.clear();
  size_t at = 0;
  for (size_t e = 0; e < num_experts_; ++e) {
    if (count_[e] == 0) continue;
    needed_.push_back(static_cast<int64_t>(e));
    begin_.push_back(at);
    at += count_[e];
    count_[e] = static_cast<uint32_t>(begin_.size() - 1);  // now: e's index in needed_
  }
  begin_.push_back(at);
  in_rows_.resize(at);
  out_rows_.resize(at);
  weights_.resize(at);
  rows_per_expert_.assign(needed_.size(), 0);
  for (size_t t = 0; t < routes.size(); ++t)
    for (size_t i = 0; i < k; ++i) {
      const size_t j = count_[static_cast<size_t>(routes[t].experts[i])];
      const size_t u = begin_[j] + rows_per_expert_[j]++;
      in_rows_[u] = static_cast<uint32_t>(first + t);
      out_rows_[u] = static_cast<uint32_t>(t * k + i);
      weights_[t * k + i] = routes[t].weights[i];
    }
  for (int64_t e : needed_) count_[static_cast<size_t>(e)] = 0;  // ready for the next call
}

// One expert's MLP on its rows, on whichever thread the backend gives it: it
// touches nothing but its own activations and its places in expert_out.
void RoutedExperts::compute(const ReadyExpert& ready, const Act& in, Act& expert_out) {
  const size_t j = ready.index, b = begin_[j], m = begin_[j + 1] - b;
  Act x = be_.act(m, mlp_.in), h = be_.act(m, mlp_.mid), y = be_.act(m, mlp_.out);
  const int64_t expert = needed_[j];
  WeightView gate = mlp_.gate_view(ready.record), up = mlp_.up_view(ready.record), down = mlp_.down_view(ready.record);
  gate.key = expert_weight_key(layer_, expert, 0);
  up.key = expert_weight_key(layer_, expert, 1);
  down.key = expert_weight_key(layer_, expert, 2);
  be_.gather(in, std::span(in_rows_).subspan(b, m), x);
  be_.gated_matmul(gate, up, x, mlp_.fn, h);
  be_.matmul(down, h, y);
  be_.scatter(y, std::span(out_rows_).subspan(b, m), expert_out);
}

bool RoutedExperts::run(int64_t layer, const Act& in, size_t first, std::span<const Route> routes, Act& out,
                        const std::function<bool()>& cancelled) {
  if (in.width() != mlp_.in || out.width() != mlp_.out || out.rows() != routes.size() || first + routes.size() > in.rows())
    fail("routed experts: rows [", in.rows(), ", ", in.width(), "] from ", first, " into [", out.rows(), ", ", out.width(),
         "] for ", routes.size(), " routes of an expert from ", mlp_.in, " to ", mlp_.out);
  if (routes.empty()) return true;
  layer_ = layer;
  if (RouteObserver* o = source_.route_observer()) o->routes(layer, routes);
  plan(routes, first);
  const size_t k = routes[0].experts.size();
  Act expert_out = be_.act(routes.size() * k, mlp_.out);  // [row][slot][out]
  // The callbacks capture one pointer each, so std::function keeps them in
  // place instead of on the heap (a decoded token's layers allocate nothing).
  struct Call {
    RoutedExperts* self;
    const Act* in;
    Act* expert_out;
    const std::function<bool()>* cancelled;
    bool stopped = false;
    std::span<const ReadyExpert> group;
  } call{this, &in, &expert_out, &cancelled};
  source_.for_each_ready_group(layer, needed_, [c = &call](std::span<const ReadyExpert> group) {
    // Cancelled: the source still hands over every expert (its reads land),
    // but none is computed; the caller unwinds right after.
    if (c->stopped || (*c->cancelled && (*c->cancelled)())) {
      c->stopped = true;
      return;
    }
    RoutedExperts& self = *c->self;
    self.group_rows_.clear();
    for (const ReadyExpert& r : group) self.group_rows_.push_back(self.begin_[r.index + 1] - self.begin_[r.index]);
    c->group = group;
    self.be_.run_experts(self.group_rows_, [c](size_t j) { c->self->compute(c->group[j], *c->in, *c->expert_out); });
  });
  const bool stopped = call.stopped;
  if (stopped) return false;
  be_.weighted_sum(expert_out, weights_, k, out);
  return true;
}

}  // namespace deltafin
