// The Anthropic Messages answer (a message, or its events: message_start,
// content_block_start / _delta / _stop, message_delta, message_stop, ping,
// error) as an AnswerWriter.
#pragma once

#include <memory>

#include "server/generation_job.h"

namespace deltafin {

// show_thinking: false for thinking.display "omitted" (thinking blocks
// stay empty).
std::unique_ptr<AnswerWriter> anthropic_answer(bool show_thinking);

// stop_reason: "stop_sequence" (a stop string), "tool_use" (the turn ended
// with at least one tool_use block), "end_turn" (it ended otherwise),
// "max_tokens" (max_tokens or the context ran out).
std::string anthropic_stop_reason(const JobResult& r, size_t tool_uses);

}  // namespace deltafin
