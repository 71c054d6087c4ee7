// A validated API request as the engine takes it: prompt tokens (the
// family's chat template, or raw text, or ids) and a token budget.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "server/api/request.h"

namespace deltafin {

struct PreparedPrompt {
  std::vector<uint32_t> tokens;
  bool chat = false;
  bool thinking = false;  // chat: generation starts in the reasoning channel
  int64_t max_new = 0;    // max_tokens, else the ceiling, capped by the context left
};

// Throws api::ApiError: 400 when the chat does not render (or the model has
// no chat format) or the prompt does not fit the context (the message gives
// the prompt's tokens and session bytes against the context limit and the
// session budget).
PreparedPrompt prepare_prompt(const Engine& engine, const api::GenerationRequest& request);

}  // namespace deltafin
