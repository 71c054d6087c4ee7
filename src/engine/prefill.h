// Expert-major prefill (design.md §6): the prompt goes through the model in
// chunks of T positions; within a chunk every layer runs all T rows together,
// so the union of the experts the chunk routes to is read once per layer and
// each expert is applied to all its rows as one batched product (moe.cpp).
// A T-position pass equals T one-position passes bit for bit (k3-model.md
// §7.9), so the chunk size changes speed and memory, never the output.
//
// Choosing T: one chunk per prompt reads each needed expert once; smaller
// chunks read an expert again in every chunk that needs it unless the cache
// still holds it, but bound the activations' memory (O(T · hidden) per layer)
// and the time until a cancel is noticed. kDefaultPrefillChunk is the
// measured choice (bench/results/*-prefill.md).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "model/kimi_k3/model.h"

namespace deltafin {

class StepObserver;

inline constexpr int64_t kDefaultPrefillChunk = 512;

// Runs `tokens` at positions session.length()... in passes of at most
// `chunk` positions (0 = all in one pass), telling `observer` (may be null)
// before and after each pass as a prefill step. Returns the last position's
// logits [1, V]; stops early (returning empty Rows) when `cancelled` (may be
// empty) returns true between passes. It is not asked before the first pass.
// `after_pass` (may be empty) is told each pass's row count once it is done,
// while the model still holds that pass's captured rows (a DSpark drafter
// takes its context from them).
Rows prefill(K3Model& model, K3Session& session, std::span<const uint32_t> tokens, int64_t chunk,
             StepObserver* observer = nullptr, const std::function<bool()>& cancelled = {},
             const std::function<void(size_t rows)>& after_pass = {});

}  // namespace deltafin
