// The OpenAI answer shapes (chat.completion / text_completion, their chunks
// and "data: [DONE]") as an AnswerWriter.
#pragma once

#include <memory>

#include "server/generation_job.h"

namespace deltafin {

// chat: /v1/chat/completions, else /v1/completions.
std::unique_ptr<AnswerWriter> openai_answer(bool chat);

}  // namespace deltafin
