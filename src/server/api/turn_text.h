// What one generation shows, token by token: the chat channels (reasoning,
// content) or the raw completion text, with the request's stop strings
// applied. Stop strings apply to the answer the client reads: the content of
// a chat turn (not its reasoning) or the completion text; the stop string
// itself is never returned.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/api/chat_output.h"

namespace deltafin::api {

class TurnText {
public:
  TurnText(const Tokenizer& tokenizer, bool chat, bool thinking, std::vector<std::string> stops);

  // Text to show after this token (either part may be empty).
  OutputDelta push(uint32_t id);
  // End of generation (not after a stop): whatever was held back.
  OutputDelta finish();
  // A stop string has completed: generation should end now.
  bool stopped() const { return stop_.stopped(); }
  int64_t reasoning_tokens() const { return chat_ ? chat_->reasoning_tokens() : 0; }

private:
  OutputDelta filter(OutputDelta d);

  std::optional<ChatOutputParser> chat_;
  std::optional<StreamDecoder> raw_;
  StopMatcher stop_;
};

}  // namespace deltafin::api
