#include "model/kimi_k3/chat/chat_encode.h"

namespace deltafin {

std::vector<uint32_t> encode_chat_segments(const Tokenizer& tokenizer, const std::vector<ChatSegment>& segments) {
  return encode_chat(segments, [&](std::string_view text, bool control) {
    return control ? tokenizer.encode_with_specials(text) : tokenizer.encode_ordinary(text);
  });
}

}  // namespace deltafin
