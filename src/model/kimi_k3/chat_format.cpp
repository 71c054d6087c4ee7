#include "model/kimi_k3/chat_format.h"

#include "model/kimi_k3/chat_output.h"
#include "tokenizer/chat_encode.h"
#include "tokenizer/chat_template.h"

namespace deltafin {

RenderedChat K3ChatFormat::render(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const {
  ChatOptions o;
  o.thinking = options.thinking;
  o.reasoning_effort = options.reasoning_effort;
  RenderedChat r;
  r.tokens = encode_chat_segments(tok_, render_chat(messages, o));
  r.thinking = o.thinking;  // the prompt ends with open(think), else open(response)
  return r;
}

std::unique_ptr<ChatOutput> K3ChatFormat::output(bool thinking) const {
  return std::make_unique<K3ChatOutput>(tok_, thinking);
}

}  // namespace deltafin
