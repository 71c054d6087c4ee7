// Token ids of a rendered chat: each segment tokenised on its own, special
// spellings recognised only in the renderer's control segments (k3-model.md
// §8.3, §9.1), so user text can never inject control tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kimi_k3/chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

std::vector<uint32_t> encode_chat_segments(const Tokenizer& tokenizer, const std::vector<ChatSegment>& segments);

}  // namespace deltafin
