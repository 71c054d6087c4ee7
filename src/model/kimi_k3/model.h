// The Kimi K3 forward pass (k3-model.md §7) over 1..T new positions of a
// session, in fp32, with every reduction in the kernels' canonical order so a
// T-position pass equals T one-position passes bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/kimi_k3/checkpoint.h"
#include "backend/backend.h"
#include "model/common/batch_pass.h"
#include "model/common/expert_source.h"
#include "model/common/pass_driver.h"
#include "model/common/routed_experts.h"
#include "model/common/routing.h"
#include "model/common/greedy.h"
#include "model/common/route.h"
#include "model/common/rows.h"
#include "model/kimi_k3/kda_log.h"
#include "model/kimi_k3/session.h"
#include "model/kimi_k3/weights.h"

namespace deltafin {

class ThreadPool;
class RouteLookahead;

// K3 and PassShape (model/common/causal_model.h): the experts of a layer are
// asked for slice by slice, and a cache that holds the layer's union reads
// each of them once. `cancelled` is asked before every layer and, inside a
// layer, between slices, between the experts of a slice and between the heads
// of every attention row, so a stop is seen within about poll_interval of
// model time even in one long layer of a huge prompt.
class K3Model : public CausalModel {
public:
  // Keeps references (config, weights, source and backend must outlive the model).
  K3Model(const K3Config& config, const K3Weights& weights, ExpertSource& experts, Backend& backend);
  // The same on a CPU backend of its own over `pool` (may be null).
  K3Model(const K3Config& config, const K3Weights& weights, ExpertSource& experts, ThreadPool* pool);
  ~K3Model() override;

  // CausalModel. Sessions are K3Sessions (another family's is refused).
  const ModelSummary& summary() const override { return summary_; }
  std::unique_ptr<ModelSession> new_session() const override;
  Rows forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
               const PassShape& shape = {}) override;
  // The parts' rows stacked through every layer; the attention of each part
  // (its KDA state, its MLA caches) on its own rows, sliced by slice_rows as
  // its solo pass would be. A KDA step log (set_kda_log) covers one part only.
  std::vector<Rows> forward_batch(std::span<const BatchPart> parts, const PassShape& shape = {}) override;
  // The mark copies the KDA state (fixed-size); the MLA caches are only cut.
  std::shared_ptr<SessionMark> mark(const ModelSession& session) const override;
  void rewind(ModelSession& session, const SessionMark& mark) const override;
  // States on disk: model/kimi_k3/session_file.h's layout.
  std::unique_ptr<ModelSession> copy_at(const ModelSession& session, const SessionMark& at) const override;
  uint64_t state_values(int64_t length) const override;
  void for_each_state_part(const ModelSession& session, const SessionMark& at, const StatePartFn& part) const override;
  void read_state(ModelSession& fresh, int64_t length, const StateReadFn& read) const override;
  // Verification logs every KDA step of the pass; keeping m rows cuts the
  // MLA caches and replays the KDA state from its pre-pass copy over them.
  // Both are kept in the session (K3Session::Verification), so several
  // sessions' passes may be verified and kept in any order.
  Rows forward_verify(ModelSession& session, std::span<const uint32_t> tokens) override;
  void keep_verified(ModelSession& session, size_t rows) override;

  // Route lookahead (nullptr = none): predictions become experts_.prefetch() hints.
  void set_lookahead(RouteLookahead* lookahead) { lookahead_ = lookahead; }

  // While a log is set, every forward() records its KDA step inputs there
  // (speculative verification; one session's pass: forward_batch of several
  // parts refuses); nullptr (the default) records nothing.
  void set_kda_log(KdaLog* log) { kda_log_ = log; }
  // Steps every KDA layer's state over the first `rows` rows of `log`, as the
  // logged pass did: the session must hold the state from before that pass.
  void replay_kda(K3Session& session, const KdaLog& log, size_t rows) const;

  // Context capture for DSpark (k3-model.md §10.2): after each listed 0-based
  // layer completes, every row's h (the block-partial sum after h <- p + f)
  // is rounded to BF16 and kept; captured() holds the last forward()'s rows
  // [T, layers.size() * hidden], the layers' slices concatenated in list order
  // (of a forward_batch: every part's rows, stacked in part order).
  // An empty list (the default) captures nothing.
  void set_capture_layers(std::vector<int64_t> layers) override;
  const Rows& captured() const override { return captured_; }

  // The routes of the last forward() call, [layer][position] (layer 0 empty;
  // of a forward_batch: the stacked rows').
  const std::vector<std::vector<Route>>& last_routes() const override { return routes_; }
  const K3Config& config() const { return c_; }

private:
  // The pass of forward() (one part) and forward_batch(): each part's
  // logits into `out` (as many as parts); false when cancelled.
  bool forward_k3(std::span<const BatchPart> parts, const PassShape& shape, std::span<Rows> out);
  // Refuses bad parts before any session changes; fills part_sessions_.
  void check_parts(std::span<const BatchPart> parts);
  // Attention over rows that sit at positions s.length() + offset ...: the
  // layer's cache or state must already hold every position before them.
  void attention_kda(int64_t layer, K3Session& s, const Act& x, Act& out);
  void attention_mla(int64_t layer, K3Session& s, const Act& x, Act& out, size_t offset);
  void attention_sliced(int64_t layer, K3Session& s, const Act& x, Act& out, size_t slice_rows);
  void dense_mlp(const LayerWeights& w, const Act& x, Act& out, size_t slice_rows);
  void moe(int64_t layer, const Act& x, Act& out, size_t slice_rows);
  void moe_rows(int64_t layer, const Act& x, const Act& zl, size_t r0, size_t n, Act& out);
  // out = Mix (k3-model.md §7.2) over the block anchors and `last`, with the
  // pseudo-query s; out = last while there is no anchor yet.
  void mix(const std::vector<Act>& anchors, const Act& last, const std::vector<float>& s, Act& out);
  // The pass driver's throttled poll (false outside a pass);
  // stop_if_cancelled() throws PassCancelled, which forward() catches: only
  // ever called between whole units of work.
  bool cancel_requested();
  void stop_if_cancelled();
  struct PassCancelled {};

  const K3Config& c_;
  const K3Weights& w_;
  ModelSummary summary_;
  ExpertSource& experts_;
  std::unique_ptr<Backend> own_backend_;
  Backend& be_;
  RoutedExperts routed_;
  std::vector<float> router_host_;  // a layer's router logits, read for the routing decision
  RouteScratch route_scratch_;
  RouteLookahead* lookahead_ = nullptr;
  std::vector<std::vector<Route>> routes_;
  KdaLog* kda_log_ = nullptr;
  std::vector<int64_t> capture_layers_;
  Rows captured_;
  // Reused from pass to pass (a decoded token allocates none of them): the
  // Mix's list of values, the AttnRes anchors, the lookahead's copy of a row.
  std::vector<const Act*> mix_values_;
  std::vector<Act> anchors_;
  Rows lookahead_rows_;
  // The pass's parts: their rows' layout and their sessions (reused too).
  BatchLayout batch_;
  std::vector<K3Session*> part_sessions_;
  PassDriver* pass_ = nullptr;  // during forward() only
};

// The K3Session behind a family-neutral session (an error for another family's).
K3Session& k3_session(ModelSession& session);
const K3Session& k3_session(const ModelSession& session);

// A K3 expert record as the routed-experts block reads it (k3-model.md §5.1).
ExpertMlp k3_expert(const K3Config& config);

// What every K3 consumer sizes things by (summary() of a model of `config`).
ModelSummary k3_summary(const K3Config& config);

}  // namespace deltafin
