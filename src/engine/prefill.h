// Expert-major prefill (design.md §6): the prompt goes through the model
// layer-major, in passes ("groups") of many positions: every position of a
// group goes through layer i before any goes through layer i+1. Inside a
// layer, attention and the experts run in slices of `chunk` rows, so the
// per-slice scratch (attention projections, expert outputs) stays bounded
// while a layer's experts are wanted by consecutive slices only: a cache that
// holds one layer's union reads each needed expert once per group, and an
// expert is applied to all of a slice's rows routed to it as one batched
// product (moe.cpp). A T-position pass equals T one-position passes bit for
// bit (k3-model.md §7.9), so chunk and group sizes change speed and memory,
// never the output.
//
// Choosing the sizes: a group's rows keep their activations (the residual
// stream, the AttnRes block anchors, the layer's inputs and outputs) for the
// whole pass, so the group is as large as kPrefillGroupBytes of them allows:
// one group for any prompt of the bench model up to ~50K positions, ~2,400
// positions of K3 (7168 wide, 8 anchors). Across groups an expert is read
// again unless the cache still holds it. The slice (`--prefill-chunk`) trades
// batched-kernel efficiency against scratch; kDefaultPrefillChunk is the
// measured choice (below).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "load/engine_options.h"
#include "model/common/causal_model.h"

namespace deltafin {

class StepObserver;

inline constexpr uint64_t kPrefillGroupBytes = 1ull << 30;

// Positions per group: as many as kPrefillGroupBytes of the model's pass rows
// (ModelSummary::pass_row_bytes) allow, a whole number of chunks, at least
// one chunk; chunk 0 means the whole prompt in one pass.
int64_t prefill_group_rows(const ModelSummary& model, int64_t chunk, int64_t prompt_positions);

// Runs `tokens` at positions session.length()... in layer-major groups of
// `group` positions (0 = prefill_group_rows), each layer in slices of `chunk`
// rows (0 = whole group), telling `observer` (may be null) before and after
// each group as a prefill step. Returns the last position's logits [1, V].
// `cancelled` (may be empty) is asked between groups and, inside a group,
// before every layer and every ~20 ms of work inside one (PassShape); when it
// returns true the unfinished group is rolled back (the session holds whole
// groups only) and empty Rows are returned.
// `after_pass` (may be empty) is told each group's row count once it is done,
// while the model still holds that group's captured rows (a DSpark drafter
// takes its context from them). `progress` (may be empty) is told, before
// every layer, how many of the tokens are done (a group counts as its share
// of layers done).
Rows prefill(CausalModel& model, ModelSession& session, std::span<const uint32_t> tokens, int64_t chunk,
             StepObserver* observer = nullptr, const std::function<bool()>& cancelled = {},
             const std::function<void(size_t rows)>& after_pass = {}, int64_t group = 0,
             const std::function<void(int64_t done)>& progress = {});

}  // namespace deltafin
