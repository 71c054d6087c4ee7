// The family interface: what the engine, speculation, the server and the
// benchmarks need from a model, whatever its architecture. A family's model
// class implements CausalModel and its session class ModelSession; callers
// never see attention caches, recurrent states or expert layouts.
//
//   session = model.new_session()
//   logits = model.forward(*session, tokens, all_logits)   // 1..T positions
//   mark = model.mark(*session) ... model.rewind(*session, *mark)
//   model.forward_verify(*session, rows) ... model.keep_verified(*session, m)
//
// Every family keeps the exactness contract (design.md §5): a T-position pass
// equals T one-position passes bit for bit, on every thread count and ISA
// path, and keep_verified leaves the session exactly as decoding the kept
// rows one at a time would have.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/common/route.h"
#include "model/common/rows.h"

namespace deltafin {

[[noreturn]] void throw_wrong_family_session(const char* family);

// One sequence's state (caches, recurrent state), opaque to callers.
class ModelSession {
public:
  virtual ~ModelSession() = default;
  virtual int64_t length() const = 0;  // positions held
  virtual uint64_t bytes() const = 0;  // RAM the state holds now
  // The session will grow to about `positions` (the prompt and the tokens
  // to come, within the context limit): its per-position storage is
  // allocated once for them, so that growing there never doubles a buffer
  // (a doubled cache is memory the plan does not count). Growing past it
  // still works. Changes no value.
  virtual void plan_length(int64_t positions) { (void)positions; }
};

// A point a session can be rewound to (taken by CausalModel::mark).
class SessionMark {
public:
  virtual ~SessionMark() = default;
  // RAM the mark holds beside its session (K3: a copy of the KDA state).
  virtual uint64_t bytes() const { return 0; }
  int64_t length = 0;
};

// A session's state at one length as runs of fp32 values, in an order the
// family fixes (prompt states on disk, engine/prompt_disk_cache.h). `part`
// is handed each run as held; `read` fills each run in place.
using StatePartFn = std::function<void(const float* values, size_t n)>;
using StateReadFn = std::function<void(float* values, size_t n)>;

// What callers size and report things by, filled by the family.
struct ModelSummary {
  std::string family;               // the registry's name (model/registry.h)
  int64_t layers = 0, vocab = 0;
  int64_t context = 0;              // max_position_embeddings: the default context limit
  std::vector<int64_t> moe_layers;  // 0-based layers with routed experts
  int64_t experts = 0, top_k = 0;   // per MoE layer
  uint64_t expert_record_bytes = 0;
  uint64_t session_fixed_bytes = 0, session_bytes_per_position = 0;
  uint64_t pass_row_bytes = 0;      // activations one position of a layer-major pass keeps alive
};

// How one pass over many rows is cut (engine/prefill.h). The pass is layer
// major: every row goes through layer i before any goes through layer i+1.
// Inside a layer, a family may run attention and the experts in slices of
// `slice_rows` rows (0 = all rows at once), which bounds the per-slice
// scratch. `cancelled`, if set, is asked between layers (and, where a family
// can, inside one) at most once per poll_interval; when it returns true the
// pass is abandoned: forward() returns empty Rows and the session is left
// part-way (the caller rewinds to the mark it took before the pass).
// `on_layer`, if set, is told each layer's index as it starts (progress).
inline constexpr std::chrono::microseconds kCancelPollInterval{20'000};
struct PassShape {
  size_t slice_rows = 0;
  std::function<bool()> cancelled;
  std::function<void(int64_t layer)> on_layer;
  // Where a pass is run in row slices (engine/step_scheduler.h: a prompt
  // shared with other requests), told the rows done instead of the layers.
  std::function<void(size_t rows)> on_rows;
  std::chrono::microseconds poll_interval = kCancelPollInterval;  // tests set 0: every poll asks
};

// The family's own session type behind a family-neutral one; an error naming
// `family` when the session belongs to another family.
template <typename Session>
Session& session_as(ModelSession& session, const char* family) {
  auto* s = dynamic_cast<Session*>(&session);
  if (!s) throw_wrong_family_session(family);
  return *s;
}
template <typename Session>
const Session& session_as(const ModelSession& session, const char* family) {
  auto* s = dynamic_cast<const Session*>(&session);
  if (!s) throw_wrong_family_session(family);
  return *s;
}

// One session's rows in a batched pass (CausalModel::forward_batch).
struct BatchPart {
  ModelSession* session = nullptr;
  std::span<const uint32_t> tokens;  // non-empty
  bool all_logits = false;           // logits of every row, else of the last
};

// What every forward_batch refuses before any session changes: no parts, a
// part without a session or without tokens, a session in two parts (its
// rows would attend to each other's as if they were one sequence's).
void check_batch_parts(std::span<const BatchPart> parts);

class CausalModel {
public:
  virtual ~CausalModel() = default;
  virtual const ModelSummary& summary() const = 0;
  virtual std::unique_ptr<ModelSession> new_session() const = 0;

  // Runs `tokens` at positions session.length() ... and advances the session;
  // logits [T, V] when all_logits, else [1, V] for the last position.
  virtual Rows forward(ModelSession& session, std::span<const uint32_t> tokens, bool all_logits,
                       const PassShape& shape = {}) = 0;

  // Several sessions' rows as one pass (concurrent requests, engine/step_scheduler.h): each
  // part's logits equal forward(*part.session, part.tokens, part.all_logits) alone, bit for bit,
  // and each session advances as that call would advance it (every row attends only to its own
  // session). The parts' sessions are distinct. Families that batch stack the rows for every
  // product (the routed experts are then applied once to the union of the parts' routes: a
  // streamed expert is read once per pass for all parts); the default runs the parts one
  // after another. captured() then holds every part's rows stacked in part order. A cancelled
  // pass (shape.cancelled) returns an empty vector and leaves the sessions part-way (the
  // caller rewinds each to a mark taken before).
  virtual std::vector<Rows> forward_batch(std::span<const BatchPart> parts, const PassShape& shape = {});

  // A rewind point at the session's current length; rewind() returns the
  // session to exactly that state. Only rewinding backwards is allowed, and
  // only while the session has not been cut below the mark since.
  virtual std::shared_ptr<SessionMark> mark(const ModelSession& session) const = 0;
  virtual void rewind(ModelSession& session, const SessionMark& mark) const = 0;

  // Prompt reuse (engine/prompt_cache.h). A new session equal to `session`
  // rewound to `at` (a mark of it); `session` itself is not changed.
  virtual std::unique_ptr<ModelSession> copy_at(const ModelSession& session, const SessionMark& at) const = 0;

  // Prompt states on disk (engine/prompt_disk_cache.h). The state after
  // `at.length` positions as runs of values (the session may have grown
  // since the mark; only what the mark's length holds is written), its size
  // in values, and a fresh session filled back from the same runs, which
  // then equals the saved one bit for bit. read_state throws when `fresh`
  // holds positions; whatever `read` throws leaves it to be discarded.
  virtual uint64_t state_values(int64_t length) const = 0;
  virtual void for_each_state_part(const ModelSession& session, const SessionMark& at, const StatePartFn& part) const = 0;
  virtual void read_state(ModelSession& fresh, int64_t length, const StateReadFn& read) const = 0;

  // Speculative verification: a pass with every row's logits that also keeps
  // what keep_verified needs; keep_verified(rows) then leaves the session as
  // if only the pass's first `rows` positions had been run (1 <= rows <= T).
  // A pass that throws leaves the session as it was before it.
  virtual Rows forward_verify(ModelSession& session, std::span<const uint32_t> tokens) = 0;
  virtual void keep_verified(ModelSession& session, size_t rows) = 0;

  // The routes of the last forward() call, [layer][position] (empty for
  // layers without routed experts): statistics and route lookahead read them.
  virtual const std::vector<std::vector<Route>>& last_routes() const = 0;

  // Drafters that read the target's hidden states (K3's DSpark) name the
  // layers; families without such drafters capture nothing.
  virtual void set_capture_layers(std::vector<int64_t> layers) { (void)layers; }
  virtual const Rows& captured() const {
    static const Rows none;
    return none;
  }
};

}  // namespace deltafin
